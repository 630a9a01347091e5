// Rules of an ExperimentSpec, in one place for the CLI (to fail early, before
// starting anything), the coordinator (the authority) and the workers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "allreduce/data_type.h"
#include "allreduce/memory.h"
#include "allreduce/rank_groups.h"
#include "proto/experiment.pb.h"

namespace testbed {

// The defaults of a spec's numbers left at 0 (its enums default to their
// zero values, proto/vocabulary.proto).
inline constexpr int kDefaultIterations = 10;
inline constexpr int kDefaultTimeoutS = 60;
inline constexpr int kDefaultServers = 1;
inline constexpr double kDefaultModelAlphaUs = 50;

// The spec's vocabulary as the data path's types: conversions, not parses.
DataType DataTypeOf(proto::Dtype::Kind dtype);
ReduceOp ReduceOpOf(proto::Op::Kind op);
MemoryType MemoryTypeOf(proto::Memory::Kind memory);
proto::Dtype::Kind DtypeOf(DataType type);

// --segment's text: "off", "auto" or a positive size ("1MiB"), as a Segment.
absl::StatusOr<proto::Segment> ParseSegment(std::string_view text);
// Back to that text ("" where unset), for messages and tests.
std::string SegmentText(const proto::Segment& segment);

// The cost model's latency per round, in seconds (unset: the default).
double ModelAlphaSeconds(const proto::ExperimentSpec& spec);

// Whether the spec runs the parameter server (ps, or auto where it may
// choose ps).
bool UsesParameterServer(const proto::ExperimentSpec& spec);

// Whether ps can compute the spec's reduction: the shards aggregate sums
// only (an unset op is the default, sum), of float32, float64 or int32 (a
// shard refuses float16 tensors).
bool ParameterServerCanReduce(const proto::ExperimentSpec& spec);

// Bytes per element of the spec's dtype. The spec must be valid.
std::int64_t ElementBytes(const proto::ExperimentSpec& spec);

// Fills the numbers' defaults above (iterations, timeout, servers, alpha).
void ApplyDefaults(proto::ExperimentSpec& spec);

// Who checks a spec: the CLI accepts "auto" among the algorithms (it runs a
// chosen algorithm in its place, experiments/cli/auto_algorithms.h); daemons
// are only ever sent registry names; the simulator takes registry names for
// up to kMaxSimulatedWorkers ranks (common/limits.h), since it starts none.
enum class SpecReader { kDaemon, kCli, kSimulator };

// The most workers a spec may name for `reader`.
int MaxWorkers(SpecReader reader);

// The worker counts a spec sweeps over: worker_counts, else {workers}.
std::vector<int> WorkerCounts(const proto::ExperimentSpec& spec);

// The groups `workers` ranks run in under the spec's split (one group of
// all of them where it is empty): parsed here only, for the workers, the
// aggregator and the simulator alike. ValidateSpec checks it at every count.
absl::StatusOr<RankGroups> GroupsOf(const proto::ExperimentSpec& spec, int workers);

// InvalidArgument naming the first bad field: unknown algorithm, N < 1 or
// over MaxWorkers(reader), a size that is not a whole number of
// elements, no sizes, an enum value this build does not know, ...
absl::Status ValidateSpec(const proto::ExperimentSpec& spec,
                          SpecReader reader = SpecReader::kDaemon);

// The segment size the executor uses for messages of `bytes` per worker
// under the spec's `segment` (0: whole steps; unset: DefaultSegmentBytes),
// where `staged` says whether the vector is device memory staged through host
// memory (an unset segment then overlaps the copies with the transfers). The
// spec must be valid.
std::size_t SegmentBytesFor(const proto::ExperimentSpec& spec, std::int64_t bytes, bool staged);

}  // namespace testbed
