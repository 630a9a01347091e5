// The testbed's documented limits, named once: every flag range, spec
// validation and daemon check reads them from here.
#pragma once

#include <cstdint>

namespace testbed {

inline constexpr int kMaxWorkers = 1024;  // N of an experiment or a training run
inline constexpr int kMaxServers = 64;    // S, parameter-server shards of an experiment
inline constexpr int kMaxIterations = 1000000;
inline constexpr std::int64_t kMaxBytesPerWorker = std::int64_t{4} << 30;  // 4 GiB

}  // namespace testbed
