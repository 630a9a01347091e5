// One rank's part of an experiment, over any Transport: for every algorithm
// and size of the spec, warm-up iterations, then timed ones, each started by
// a barrier so that ranks start together; then a check of the result against
// the known inputs. The all-reduces run their schedules over the transport;
// "ps" pushes and pulls through the parameter server's shards instead (the
// transport then only carries the barriers). The worker daemon feeds it a UCX
// transport, the tests an in-process one.
//
// Device memory that reaches the network through host memory (staged: a
// UCX without CUDA, and ps always) is pipelined: unless the spec gives a
// segment ("off" or a size), the scheduled collectives are cut into
// StagedSegmentBytes (allreduce/segment_plan.h), and rows record it; ps is
// staged chunk by chunk by its client.
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
#include "worker/ps_client.h"

namespace testbed {

using EmitRankResult = std::function<absl::Status(const proto::RankResult&)>;

struct SweepEnvironment {
  Transport* transport = nullptr;  // the ranks' data path, and every barrier
  std::string transport_label;     // recorded with each all-reduce result
  std::string ucx_environment;     // likewise: the UCX settings that ran
  PsClient* parameter_server = nullptr;  // needed when the spec runs "ps"
  std::string tensor_prefix = "ps";      // unique per experiment: tensors are not reused
  std::string net_device;  // this rank's own interface, for wire bytes; empty: none
  // The transport hands cuda buffers to UCX as they are (UcxTransport's
  // device_direct()); else device memory is staged through host memory.
  bool device_direct = false;
};

// `spec` must be valid (ValidateSpec). Stops at the first failure, which
// names the peer or shard where it is known.
absl::Status RunSweep(const proto::ExperimentSpec& spec, const SweepEnvironment& env,
                      const EmitRankResult& emit);

}  // namespace testbed
