// A workload trace as a file (docs/workloads.md, "The trace format"):
// protobuf's JSON mapping of proto::WorkloadTrace (proto/workload.proto) with
// its field names as the .proto writes them, a version field, and the rules
// every reader relies on checked once, here, whoever wrote the file.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "allreduce/rank_groups.h"
#include "proto/workload.pb.h"

namespace testbed {

inline constexpr std::uint32_t kWorkloadTraceVersion = 1;
// What a replay or a summary takes at most: large enough for a 96-layer
// model's 1F1B step with tensor parallelism at 1,024 micro-batches.
inline constexpr int kMaxWorkloadOps = 4 << 20;

// InvalidArgument naming the first broken rule: the version; 1 <= world_size
// <= kMaxSimulatedWorkers (common/limits.h); every communicator's groups
// non-empty, disjoint, of one size and within the world (a send-receive's of
// two ranks); every operation's communicator known, a dependency only on an
// earlier operation, a collective's bytes a positive whole number of
// elements, a compute's FLOPs finite and >= 0.
absl::Status ValidateTrace(const proto::WorkloadTrace& trace);

// One JSON object, indented, for a person to read and a program to parse.
std::string TraceJson(const proto::WorkloadTrace& trace);

// Parses and checks (ValidateTrace); `path` names the text in errors.
absl::StatusOr<proto::WorkloadTrace> ParseTraceJson(const std::string& json,
                                                    const std::string& path);

absl::Status WriteTraceFile(const proto::WorkloadTrace& trace, const std::string& path);
absl::StatusOr<proto::WorkloadTrace> ReadTraceFile(const std::string& path);

// Bytes per element of the trace's dtype.
std::int64_t TraceElementBytes(const proto::WorkloadTrace& trace);

// A communicator's groups over the trace's world, every rank it leaves out
// alone (allreduce/rank_groups.h's GroupsOfMembers): what the simulator and
// the harness's split (`SplitText`) take.
absl::StatusOr<RankGroups> CommunicatorGroups(const proto::Communicator& c, int world_size);

}  // namespace testbed
