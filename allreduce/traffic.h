// Traffic read off schedules without running them: what every rank of a
// collective sends and receives, and how many rounds it takes.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "allreduce/collective.h"

namespace testbed {

struct RankTraffic {
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
};

struct TrafficSummary {
  std::int64_t total_bytes = 0;     // payload bytes sent, all ranks together
  std::int64_t max_rank_bytes = 0;  // the busiest rank's busier direction (its link's load)
  int rounds = 0;
  std::vector<RankTraffic> per_rank;
};

// `bytes` is each rank's vector size; it must be a multiple of element_size.
TrafficSummary CountTraffic(const Collective& collective, int world_size, std::int64_t bytes,
                            std::int64_t element_size, int root = 0);

}  // namespace testbed
