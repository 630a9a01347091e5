// Rules of an ExperimentSpec, in one place for the CLI (to fail early, before
// starting anything), the coordinator (the authority) and the workers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "proto/experiment.pb.h"

namespace testbed {

// Whether the spec runs the parameter server (ps, or auto where it may
// choose ps).
bool UsesParameterServer(const proto::ExperimentSpec& spec);

// Whether ps can compute the spec's reduction: the shards aggregate sums
// only (an unset op is the default, sum), of float32, float64 or int32 (a
// shard refuses float16 tensors).
bool ParameterServerCanReduce(const proto::ExperimentSpec& spec);

// Bytes per element of the spec's dtype. The spec must be valid.
std::int64_t ElementBytes(const proto::ExperimentSpec& spec);

// Fills the documented defaults (iterations 10, dtype float32, op sum, ...).
void ApplyDefaults(proto::ExperimentSpec& spec);

// Who checks a spec: the CLI accepts "auto" among the algorithms (it runs a
// chosen algorithm in its place, experiments/cli/auto_algorithms.h); daemons
// are only ever sent registry names.
enum class SpecReader { kDaemon, kCli };

// InvalidArgument naming the first bad field: unknown algorithm, N < 1, a size
// that is not a whole number of elements, no sizes, ...
absl::Status ValidateSpec(const proto::ExperimentSpec& spec,
                          SpecReader reader = SpecReader::kDaemon);

// The segment size the executor uses for messages of `bytes` per worker
// under the spec's `segment` (0: whole steps). The spec must be valid.
std::size_t SegmentBytesFor(const proto::ExperimentSpec& spec, std::int64_t bytes);

}  // namespace testbed
