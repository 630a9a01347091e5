#include "allreduce/traffic.h"

#include <algorithm>

namespace testbed {

TrafficSummary CountTraffic(const Collective& collective, int world_size, std::int64_t bytes,
                            std::int64_t element_size, int root) {
  TrafficSummary summary;
  const std::int64_t count = bytes / element_size;
  for (int rank = 0; rank < world_size; ++rank) {
    const Schedule s = collective.build(rank, world_size, count, root);
    const RankTraffic t{s.ElementsSent() * element_size, s.ElementsReceived() * element_size};
    summary.per_rank.push_back(t);
    summary.total_bytes += t.bytes_sent;
    summary.max_rank_bytes =
        std::max({summary.max_rank_bytes, t.bytes_sent, t.bytes_received});
    summary.rounds = static_cast<int>(s.rounds.size());
  }
  return summary;
}

}  // namespace testbed
