#include "allreduce/traffic.h"

#include <algorithm>

namespace testbed {

namespace {

// The traffic of `ranks` (world ranks), each rank's schedule from `build`.
template <typename Build>
TrafficSummary CountRanks(const std::vector<int>& ranks, int racks, std::int64_t element_size,
                          const Placement& placement, const Build& build) {
  TrafficSummary summary;
  summary.per_rack.resize(static_cast<std::size_t>(racks));
  for (const int rank : ranks) {
    const Schedule s = build(rank);
    const RankTraffic t{s.ElementsSent() * element_size, s.ElementsReceived() * element_size};
    summary.per_rank.push_back(t);
    summary.total_bytes += t.bytes_sent;
    summary.max_rank_bytes =
        std::max({summary.max_rank_bytes, t.bytes_sent, t.bytes_received});
    summary.rounds = static_cast<int>(s.rounds.size());
    const int rack = placement.RackOf(rank);
    for (const Round& round : s.rounds) {
      for (const Step& step : round.steps) {
        const int peer_rack = placement.RackOf(step.peer);
        if (step.kind != StepKind::kSend || peer_rack == rack) continue;
        const std::int64_t sent = step.count * element_size;
        summary.cross_rack_bytes += sent;
        summary.per_rack[static_cast<std::size_t>(rack)].bytes_up += sent;
        summary.per_rack[static_cast<std::size_t>(peer_rack)].bytes_down += sent;
      }
    }
  }
  return summary;
}

}  // namespace

TrafficSummary CountTraffic(const Collective& collective, int world_size, std::int64_t bytes,
                            std::int64_t element_size, int root, const Placement& placement) {
  const std::int64_t count = bytes / element_size;
  return CountRanks(RankGroups::World(world_size).members[0], placement.Racks(world_size),
                    element_size, placement, [&](int rank) {
                      return collective.Build(rank, world_size, count, root, placement);
                    });
}

TrafficSummary CountGroupTraffic(const Collective& collective, const RankGroups& groups, int group,
                                 std::int64_t bytes, std::int64_t element_size, int root,
                                 const Placement& world) {
  const std::int64_t count = bytes / element_size;
  return CountRanks(groups.members[static_cast<std::size_t>(group)],
                    world.Racks(groups.world_size()), element_size, world, [&](int rank) {
                      return BuildInGroup(collective, groups, rank, count, root, world);
                    });
}

}  // namespace testbed
