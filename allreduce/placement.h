// Where the ranks of a collective sit on a fabric of racks: the rack of each
// rank, as a value. Schedule builders that care (hierarchical all-reduce)
// read it; traffic counting reads it to say which bytes cross which rack's
// uplink (allreduce/traffic.h). The fabric spec (proto/fabric.proto) is where
// a user states racks and placement; this is what the core is handed.
//
// Thread-safety: a plain value.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace testbed {

struct Placement {
  // rack_of_rank[r]: the rack of rank r, 0-based. Racks are numbered densely
  // from 0; an empty vector means one rack holding every rank (a flat switch).
  std::vector<int> rack_of_rank;

  // The flat switch: every rank in rack 0.
  static Placement Flat() { return {}; }
  // `rack_sizes[i]` ranks in rack i; ranks fill rack 0 first, then rack 1...
  static Placement Packed(const std::vector<int>& rack_sizes);
  // The same racks, ranks dealt one per rack in turn (rank r in rack r mod
  // racks while that rack has room): every ring hop crosses racks.
  static Placement RoundRobin(const std::vector<int>& rack_sizes);

  int RackOf(int rank) const {
    return rack_of_rank.empty() ? 0 : rack_of_rank[static_cast<std::size_t>(rank)];
  }
  // How many racks hold at least one of the first `world_size` ranks' racks:
  // the highest rack index plus one (1 for the flat switch).
  int Racks(int world_size) const;
  // The ranks of each rack, ascending, for a collective of `world_size` ranks.
  std::vector<std::vector<int>> Members(int world_size) const;
};

// Checks `placement` against a collective of `world_size` ranks: one entry per
// rank (or none) and racks numbered 0..R-1 with none empty.
absl::Status ValidateRackPlacement(const Placement& placement, int world_size);

}  // namespace testbed
