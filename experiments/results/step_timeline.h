// A replayed step's timeline (docs/workloads.md, "Timelines of a step"): the
// start and end of every operation of a workload trace, as the simulator or
// the daemons' medians replayed it (experiments/workload/step_simulation.h),
// drawn with the timelines of runs (experiments/results/timeline.h). A rank
// has a track for its compute and one per communicator it is in, because
// those are the streams the replay runs at once; a span is an operation,
// named by its kind and label, with the bytes that rank sends and receives in
// it (a collective's closed form over its group's ranks, a send-receive's
// vector with its peer). The critical rank's tracks say so.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "experiments/results/timeline.h"
#include "experiments/workload/step_simulation.h"
#include "experiments/workload/step_summary.h"
#include "proto/workload.pb.h"

namespace testbed {

// `step` replayed from `trace` (ops by the trace's index), as one process
// titled `title`.
TimelineRow StepTimeline(const proto::WorkloadTrace& trace, const TraceAlgorithms& algorithms,
                         const StepSimulation& step, std::string title);

}  // namespace testbed
