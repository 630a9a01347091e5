// `testbed workload --run`: a trace's step replayed on real daemons, as
// Meta's PARAM replays a trace's collectives on a cluster. Each distinct
// collective of the step (communicator, kind, bytes) runs on `testbed
// local`'s daemons (loopback or an emulated cluster, the fabric's racks) with
// the communicator's groups as the spec's split (proto/experiment.proto),
// every group checked and every row's bytes the trace's; the step is then
// replayed (experiments/workload/step_simulation.h) with those measured
// times, compute as the FLOPs over the stated device rate.
//
// What it leaves out: the collectives are measured one at a time, so two
// that overlap in the step do not share links here (the simulator's replay
// leaves out the same); a send-receive is timed as a broadcast inside its
// pair from its lower rank.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/cli/local_command.h"
#include "experiments/workload/step_simulation.h"
#include "experiments/workload/step_summary.h"
#include "proto/experiment.pb.h"
#include "proto/workload.pb.h"

namespace testbed {

struct WorkloadRunSettings {
  proto::Network::Kind network = proto::Network::loopback;
  std::uint64_t link_rate_bps = 0;  // netns: each node's link
  proto::Fabric fabric;
  std::uint32_t iterations = 3;     // timed, per collective; its median is its time
  LocalOptions local;               // logs and TLS of the daemons
};

// One distinct collective as it ran: its operation's kind and communicator,
// and a row per group of the communicator.
struct MeasuredCollective {
  proto::WorkloadOp op;
  std::vector<proto::ResultRow> rows;
  double seconds = 0;  // the slowest group's median
};

struct MeasuredStep {
  StepSimulation step;
  std::vector<MeasuredCollective> collectives;
};

// The spec that runs `op`'s collective on the trace's world with `c`'s groups.
absl::StatusOr<proto::ExperimentSpec> CollectiveSpec(const proto::WorkloadTrace& trace,
                                                     const TraceAlgorithms& algorithms,
                                                     const WorkloadRunSettings& settings,
                                                     const proto::WorkloadOp& op,
                                                     const proto::Communicator& c);

// Runs every distinct collective, then replays the step with their times.
// Fails naming the operation where a group's result is wrong or its bytes
// are not the trace's.
absl::StatusOr<MeasuredStep> RunStepOnDaemons(const proto::WorkloadTrace& trace,
                                              const TraceAlgorithms& algorithms,
                                              const WorkloadRunSettings& settings,
                                              double device_flops_per_s);

}  // namespace testbed
