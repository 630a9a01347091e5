#include "allreduce/rank_groups.h"

#include <charconv>
#include <map>

#include "absl/strings/str_cat.h"

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

absl::StatusOr<RankGroups> ParseSplit(std::string_view text, int world_size) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad split '", std::string(text), "': div:K (blocks of K consecutive ranks) or mod:K (K groups of "
        "every K-th rank), as nccl-tests' NCCL_TESTS_SPLIT"));
  };
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return bad();
  const std::string_view kind = text.substr(0, colon);
  const std::string_view number = text.substr(colon + 1);
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
