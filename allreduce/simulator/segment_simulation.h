// Segmented schedules (allreduce/segment_plan.h) played on the simulator's
// flows as allreduce/executor.cc's SegmentRun runs them: a send, or a receive
// landing in place, is posted once its plan prerequisites finished; a receive
// into scratch is posted once its round's scratch slot is free (the rounds
// kScratchSlots before it applied), and applied once it arrived and its
// prerequisites finished; a message enters the network alpha after both of
// its sides are posted (rendezvous) and its send finishes when it arrives;
// messages between two ranks go one at a time, in order (one connection).
// A rank's round ends when its receives are applied (the executor's
// observer). SimulateSchedule (simulation.h) calls it when
// SimSetup::segment_bytes > 0.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "allreduce/segment_plan.h"
#include "allreduce/simulator/simulation.h"

namespace testbed {

// Plays one plan per rank; fills each result rank's time_s (and spans, with
// setup.record_spans) and the result's flow counts. `result` holds one rank
// per plan, its payload already counted.
absl::Status PlaySegmentPlans(const std::vector<SegmentPlan>& plans, std::int64_t element_size,
                              const SimSetup& setup, SimResult& result);

}  // namespace testbed
