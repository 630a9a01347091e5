// Groups of ranks: a world's ranks split into groups that each run their own
// collective at the same time - the tensor-, data- and pipeline-parallel
// groups of a training step, or nccl-tests' NCCL_TESTS_SPLIT ("DIV 4": blocks
// of 4 consecutive ranks, inside racks of 4 when packed; "MOD 4": 4 groups of
// every fourth rank, across racks). A group's collective is the same pure
// schedule, built for the rank's index in its group and the group's size,
// with its peers named as world ranks (docs/design.md, "The schedule is
// data"), so the executor, the traffic count and the simulator take it as
// they take any schedule.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "allreduce/collective.h"
#include "allreduce/placement.h"
#include "allreduce/schedule.h"

namespace testbed {

struct RankGroups {
  std::vector<std::vector<int>> members;  // each group's world ranks, ascending
  std::vector<int> group_of_rank;         // by world rank
  std::vector<int> index_in_group;        // by world rank: its rank within its group

  // Every rank in one group: the world, as a collective without groups runs.
  static RankGroups World(int world_size);
  int world_size() const { return static_cast<int>(group_of_rank.size()); }
  const std::vector<int>& GroupOf(int rank) const {
    return members[static_cast<std::size_t>(group_of_rank[static_cast<std::size_t>(rank)])];
  }
};

// nccl-tests' split colours: rank r joins group r / k (kDiv: blocks of k
// consecutive ranks) or group r mod k (kMod: k groups, each a rank of every
// block of k).
enum class SplitKind { kDiv, kMod };

// The groups of `world_size` ranks under the split; k in 1..world_size.
absl::StatusOr<RankGroups> SplitRanks(int world_size, SplitKind kind, int k);

// Groups given by their members (a trace's communicator, docs/workloads.md):
// disjoint world ranks in 0..world_size-1, each group's sorted; every rank in
// none of them runs alone, a group of one.
absl::StatusOr<RankGroups> GroupsOfMembers(std::vector<std::vector<int>> groups, int world_size);

// "div:4", "mod:2" (nccl-tests' "DIV 4", "MOD 2"), or the members themselves,
// "groups:0,2/1,3" (GroupsOfMembers), for flags and specs.
absl::StatusOr<RankGroups> ParseSplit(std::string_view text, int world_size);

// The "groups:..." text of `groups`' groups of more than one rank: what
// ParseSplit reads back as the same groups.
std::string SplitText(const RankGroups& groups);

// The racks of `members` (world ranks) as a placement of the group, racks
// renumbered densely in order of their first member.
Placement GroupPlacement(const Placement& world, const std::vector<int>& members);

// World rank `rank`'s schedule of `collective` in its group: built for its
// index and the group's size on the group's placement, every peer mapped to
// its world rank. `root` is an index within the group.
Schedule BuildInGroup(const Collective& collective, const RankGroups& groups, int rank,
                      std::int64_t count, int root = 0, const Placement& world = Placement::Flat());

}  // namespace testbed
