// One rank's part of an experiment, over any Transport: for every algorithm
// and size of the spec, warm-up iterations, then timed ones, each started by
// a barrier so that ranks start together; then a check of the result against
// the known inputs. No gRPC here: the worker daemon feeds it a UCX transport,
// the tests an in-process one.
//
// Buffers are allocated and touched once for the largest size and reused:
// first-touch page faults on this kind of machine cost more than a large
// collective, and must not be timed.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "allreduce/transport/transport.h"
#include "proto/experiment.pb.h"

namespace testbed {

using EmitRankResult = std::function<absl::Status(const proto::RankResult&)>;

// `spec` must be valid (ValidateSpec). `transport_label` goes into each result.
// Stops at the first failure, which names the peer where the transport knows it.
absl::Status RunSweep(const proto::ExperimentSpec& spec, Transport& transport,
                      const std::string& transport_label, const EmitRankResult& emit);

}  // namespace testbed
