// The testbed's documented limits, named once: every flag range, spec
// validation and daemon check reads them from here.
#pragma once

#include <cstdint>

namespace testbed {

inline constexpr int kMaxWorkers = 1024;  // N of an experiment or a training run
// N that `testbed simulate` plays (no daemons: memory and time are the limit:
// a ring's schedules hold 2 N^2 sends, naive's one round N^2 flows - about
// 2 GB and 12 GB at this N, docs/simulator.md); rows and fabrics of simulated
// runs are read up to it.
inline constexpr int kMaxSimulatedWorkers = 8192;
// What a segmented simulation's plans may hold in memory (--segment): every
// segment of every step is an operation with its dependents, so naive's one
// round of N-1 receives, each waiting on the round's sends, grows as N^3 -
// 3.5 GB of peak memory at N = 256 with 16 segments a step.
inline constexpr std::int64_t kMaxSegmentPlanBytes = std::int64_t{4} << 30;
// Ranks a timeline (--timeline) records: a ring's N ranks have 2(N-1)
// rounds each, about 13 MB of trace JSON at this N, what Perfetto opens.
inline constexpr int kMaxTimelineRanks = 256;
inline constexpr int kMaxServers = 64;    // S, parameter-server shards of an experiment
inline constexpr int kMaxIterations = 1000000;
inline constexpr std::int64_t kMaxBytesPerWorker = std::int64_t{4} << 30;  // 4 GiB

}  // namespace testbed
