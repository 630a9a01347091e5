#include "allreduce/placement.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace testbed {

Placement Placement::Packed(const std::vector<int>& rack_sizes) {
  Placement p;
  for (std::size_t rack = 0; rack < rack_sizes.size(); ++rack) {
    p.rack_of_rank.insert(p.rack_of_rank.end(), static_cast<std::size_t>(rack_sizes[rack]),
                          static_cast<int>(rack));
  }
  return p;
}

Placement Placement::RoundRobin(const std::vector<int>& rack_sizes) {
  Placement p;
  std::vector<int> room = rack_sizes;
  int total = 0;
  for (int size : rack_sizes) total += size;
  for (std::size_t rack = 0; static_cast<int>(p.rack_of_rank.size()) < total;
       rack = (rack + 1) % room.size()) {
    if (room[rack] == 0) continue;
    --room[rack];
    p.rack_of_rank.push_back(static_cast<int>(rack));
  }
  return p;
}

int Placement::Racks(int world_size) const {
  int racks = 1;
  for (int r = 0; r < world_size; ++r) racks = std::max(racks, RackOf(r) + 1);
  return racks;
}

std::vector<std::vector<int>> Placement::Members(int world_size) const {
  std::vector<std::vector<int>> members(static_cast<std::size_t>(Racks(world_size)));
  for (int r = 0; r < world_size; ++r) members[static_cast<std::size_t>(RackOf(r))].push_back(r);
  return members;
}

absl::Status ValidateRackPlacement(const Placement& placement, int world_size) {
  if (placement.rack_of_rank.empty()) return absl::OkStatus();
  if (static_cast<int>(placement.rack_of_rank.size()) != world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("the placement names racks for ", placement.rack_of_rank.size(),
                     " ranks, but the collective has ", world_size));
  }
  for (int r = 0; r < world_size; ++r) {
    if (placement.RackOf(r) < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", r, " is placed in rack ", placement.RackOf(r)));
    }
  }
  const std::vector<std::vector<int>> members = placement.Members(world_size);
  for (std::size_t rack = 0; rack < members.size(); ++rack) {
    if (members[rack].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rack ", rack, " holds no rank: number racks 0..", members.size() - 1, " densely"));
    }
  }
  return absl::OkStatus();
}

}  // namespace testbed
