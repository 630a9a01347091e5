// A workload trace's step replayed (docs/workloads.md, "Replay in the
// simulator"): every operation starts once its dependencies ended and its
// resource is free - a compute waits for each of its ranks' one compute
// stream, a communication for its communicator's one stream (as NCCL runs one
// stream per process group) - and lasts what it lasts: FLOPs over the
// device's rate, and a communication either a time given for it (ReplayStep:
// the daemons' medians) or, simulated (SimulateStep), its collective with all
// of its communicator's groups played on the fabric together with every
// other communication in flight, so operations that overlap share links
// (allreduce/simulator/concurrent_collectives.h). A send-receive is a
// broadcast inside its pair.
//
// Thread-safety: a pure function.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "allreduce/simulator/simulation.h"
#include "experiments/workload/step_summary.h"
#include "proto/workload.pb.h"

namespace testbed {

struct OpTiming {
  double start_s = 0;
  double end_s = 0;
};

// One rank's step: busy time of its compute, of its communication, and of
// both at once.
struct RankStep {
  double compute_s = 0;
  double communication_s = 0;  // the union of its communications' spans
  double overlap_s = 0;        // communication hidden behind compute
  double exposed_s() const { return communication_s - overlap_s; }
  double idle(double step_s) const { return step_s - compute_s - exposed_s(); }
};

struct StepSimulation {
  double step_s = 0;
  std::vector<OpTiming> ops;   // by the trace's index
  std::vector<RankStep> ranks;
  int critical_rank = 0;       // the rank with the most compute and exposed communication
};

// How long an operation's collective takes, all of its communicator's groups
// at once: simulated (SimulateStep) or measured on the daemons
// (experiments/cli/workload_run.h). Asked once per distinct (communicator,
// kind, bytes).
using CollectiveTime = std::function<absl::StatusOr<double>(const proto::WorkloadOp& op,
                                                            const proto::Communicator& c)>;

// The step replayed with each collective lasting what `time` says (asked once
// per distinct communicator, kind and bytes), compute its FLOPs over
// `device_flops_per_s`.
absl::StatusOr<StepSimulation> ReplayStep(const proto::WorkloadTrace& trace,
                                          const CollectiveTime& time, double device_flops_per_s);

// `setup` describes the world's fabric (its placement and rates for
// trace.world_size() ranks, alpha, the host cost); its groups and start
// delays are not used: groups come per operation, and a slow rank here is a
// slower device.
absl::StatusOr<StepSimulation> SimulateStep(const proto::WorkloadTrace& trace,
                                            const TraceAlgorithms& algorithms,
                                            const SimSetup& setup, double device_flops_per_s);

}  // namespace testbed
