#include "allreduce/rank_groups.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace testbed {

RankGroups RankGroups::World(int world_size) {
  RankGroups groups;
  groups.members.emplace_back();
  for (int r = 0; r < world_size; ++r) {
    groups.members[0].push_back(r);
    groups.group_of_rank.push_back(0);
    groups.index_in_group.push_back(r);
  }
  return groups;
}

absl::StatusOr<RankGroups> SplitRanks(int world_size, SplitKind kind, int k) {
  if (world_size < 1) return absl::InvalidArgumentError("a split needs at least one rank");
  if (k < 1 || k > world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("a split's k must be 1..", world_size, " (the ranks), not ", k));
  }
  RankGroups groups;
  const int count = kind == SplitKind::kDiv ? (world_size + k - 1) / k : k;
  groups.members.resize(static_cast<std::size_t>(count));
  for (int r = 0; r < world_size; ++r) {
    const int group = kind == SplitKind::kDiv ? r / k : r % k;
    std::vector<int>& members = groups.members[static_cast<std::size_t>(group)];
    groups.group_of_rank.push_back(group);
    groups.index_in_group.push_back(static_cast<int>(members.size()));
    members.push_back(r);
  }
  return groups;
}

absl::StatusOr<RankGroups> GroupsOfMembers(std::vector<std::vector<int>> groups, int world_size) {
  RankGroups out;
  out.group_of_rank.assign(static_cast<std::size_t>(std::max(world_size, 0)), -1);
  out.index_in_group.assign(out.group_of_rank.size(), 0);
  const auto add = [&](std::vector<int> members) -> absl::Status {
    std::sort(members.begin(), members.end());
    const int g = static_cast<int>(out.members.size());
    for (int i = 0; i < static_cast<int>(members.size()); ++i) {
      const int r = members[static_cast<std::size_t>(i)];
      if (r < 0 || r >= world_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("rank ", r, " of a group is not one of the ", world_size, " ranks"));
      }
      if (out.group_of_rank[static_cast<std::size_t>(r)] >= 0) {
        return absl::InvalidArgumentError(absl::StrCat("rank ", r, " is in two groups"));
      }
      out.group_of_rank[static_cast<std::size_t>(r)] = g;
      out.index_in_group[static_cast<std::size_t>(r)] = i;
    }
    out.members.push_back(std::move(members));
    return absl::OkStatus();
  };
  for (std::vector<int>& members : groups) {
    if (members.empty()) return absl::InvalidArgumentError("a group has no ranks");
    if (absl::Status st = add(std::move(members)); !st.ok()) return st;
  }
  for (int r = 0; r < world_size; ++r) {
    if (out.group_of_rank[static_cast<std::size_t>(r)] < 0) (void)add({r});
  }
  return out;
}

std::string SplitText(const RankGroups& groups) {
  std::vector<std::string> listed;
  for (const std::vector<int>& members : groups.members) {
    if (members.size() > 1) listed.push_back(absl::StrJoin(members, ","));
  }
  return absl::StrCat("groups:", absl::StrJoin(listed, "/"));
}

absl::StatusOr<RankGroups> ParseSplit(std::string_view text, int world_size) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad split '", std::string(text), "': div:K (blocks of K consecutive ranks) or mod:K (K groups of "
        "every K-th rank), as nccl-tests' NCCL_TESTS_SPLIT, or groups:0,2/1,3 (the members)"));
  };
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return bad();
  const std::string_view kind = text.substr(0, colon);
  const std::string_view number = text.substr(colon + 1);
  if (kind == "groups") {
    std::vector<std::vector<int>> groups;
    const std::vector<std::string> listed = absl::StrSplit(std::string(number), '/', absl::SkipEmpty());
    for (const std::string& group : listed) {
      std::vector<int>& members = groups.emplace_back();
      for (const std::string& rank : std::vector<std::string>(absl::StrSplit(group, ','))) {
        int r = -1;
        const auto [end, error] = std::from_chars(rank.data(), rank.data() + rank.size(), r);
        if (error != std::errc() || end != rank.data() + rank.size()) return bad();
        members.push_back(r);
      }
    }
    if (world_size < 1) return absl::InvalidArgumentError("a split needs at least one rank");
    return GroupsOfMembers(std::move(groups), world_size);
  }
  int k = 0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), k);
  if (error != std::errc() || end != number.data() + number.size()) return bad();
  if (kind == "div") return SplitRanks(world_size, SplitKind::kDiv, k);
  if (kind == "mod") return SplitRanks(world_size, SplitKind::kMod, k);
  return bad();
}

Placement GroupPlacement(const Placement& world, const std::vector<int>& members) {
  if (world.rack_of_rank.empty()) return Placement::Flat();
  Placement group;
  std::map<int, int> renumbered;
  for (int rank : members) {
    const auto [it, added] =
        renumbered.emplace(world.RackOf(rank), static_cast<int>(renumbered.size()));
    group.rack_of_rank.push_back(it->second);
  }
  return group;
}

Schedule BuildInGroup(const Collective& collective, const RankGroups& groups, int rank,
                      std::int64_t count, int root, const Placement& world) {
  const std::vector<int>& members = groups.GroupOf(rank);
  const int index = groups.index_in_group[static_cast<std::size_t>(rank)];
  Schedule schedule = collective.Build(index, static_cast<int>(members.size()), count, root,
                                       GroupPlacement(world, members));
  schedule.rank = rank;
  schedule.world_size = groups.world_size();
  for (Round& round : schedule.rounds) {
    for (Step& step : round.steps) step.peer = members[static_cast<std::size_t>(step.peer)];
  }
  return schedule;
}

}  // namespace testbed
