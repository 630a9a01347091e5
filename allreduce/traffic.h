// Traffic read off schedules without running them: what every rank of a
// collective sends and receives, and how many rounds it takes.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "allreduce/collective.h"
#include "allreduce/rank_groups.h"

namespace testbed {

struct RankTraffic {
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
};

// A rack's uplink to the spine (placement.h): the bytes its ranks send to
// ranks in other racks go up it, the bytes they receive from them come down.
struct UplinkTraffic {
  std::int64_t bytes_up = 0;
  std::int64_t bytes_down = 0;
  friend bool operator==(const UplinkTraffic&, const UplinkTraffic&) = default;
};

struct TrafficSummary {
  std::int64_t total_bytes = 0;       // payload bytes sent, all ranks together
  std::int64_t max_rank_bytes = 0;    // the busiest rank's busier direction (its link's load)
  std::int64_t cross_rack_bytes = 0;  // of total_bytes, those sent to another rack
  int rounds = 0;
  std::vector<RankTraffic> per_rank;
  std::vector<UplinkTraffic> per_rack;  // one per rack of the placement (one: the flat switch)
};

// `bytes` is each rank's vector size; it must be a multiple of element_size.
// The collective must have a schedule; `placement` must pass ValidateRackPlacement.
TrafficSummary CountTraffic(const Collective& collective, int world_size, std::int64_t bytes,
                            std::int64_t element_size, int root = 0,
                            const Placement& placement = Placement::Flat());

// One group of a split (rank_groups.h) on its own: its ranks' schedules in
// the group (BuildInGroup), counted on the world's racks, per_rank by index
// in the group. `group` must be an index into groups.members.
TrafficSummary CountGroupTraffic(const Collective& collective, const RankGroups& groups, int group,
                                 std::int64_t bytes, std::int64_t element_size, int root = 0,
                                 const Placement& world = Placement::Flat());

}  // namespace testbed
