// What one step of a workload trace moves and computes, per kind of
// communicator and operation (docs/workloads.md, "Reading the summary"):
// each rank's payload as the chosen algorithms move it (their closed forms in
// the registry, allreduce/collective.h, which the schedules' own counts meet
// exactly), the busiest rank's share, and - for a generated trace - the
// course's closed form for that rank beside it, with the memory per card and
// the pipeline bubble.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "allreduce/collective.h"
#include "experiments/workload/memory_calculator.h"
#include "proto/workload.pb.h"

namespace testbed {

// Which registry entry runs each collective of a trace.
struct TraceAlgorithms {
  const Collective* all_reduce = nullptr;      // default: ring
  const Collective* reduce_scatter = nullptr;  // default: the ring reduce-scatter
  const Collective* all_gather = nullptr;      // default: the ring all-gather
  // A send-receive, replayed (simulated or on the daemons) as this inside its pair.
  const Collective* send_recv = nullptr;       // default: broadcast
};
TraceAlgorithms DefaultTraceAlgorithms();
// The entry for an operation's kind; nullptr for compute.
const Collective* AlgorithmOf(const TraceAlgorithms& algorithms, proto::WorkloadOp::Kind kind);

struct TrafficLine {
  proto::CommunicatorRole::Kind role = proto::CommunicatorRole::data_parallel;
  proto::WorkloadOp::Kind kind = proto::WorkloadOp::compute;
  int ops = 0;                     // operations (each on every group of its communicator)
  std::uint64_t vector_bytes = 0;  // their vectors' bytes, one group's each
  double sent_bytes = 0;           // payload sent, every rank together
  double flops = 0;                // compute: every rank together
  int busiest_rank = 0;            // the rank that sends most (compute: computes most)
  double busiest = 0;              // its bytes sent (compute: its FLOPs)
  // The course's closed form of `busiest` for that rank; empty unless the
  // trace was generated (generated_from).
  std::optional<double> closed_form;
};

struct StepSummary {
  std::vector<TrafficLine> lines;  // in order of role, then kind
  std::vector<double> sent_per_rank;
  std::vector<double> flops_per_rank;
  // A generated trace's: its card's parameters, ZeRO stage and degrees.
  double card_parameters = 0;  // of the busiest rank's stage, over t
  int zero_stage = 0;
  int data_parallel = 1;
  std::vector<ZeroStage> memory;  // the calculator's, for card_parameters over d cards
  std::optional<PipelineBubble> bubble;
};

StepSummary SummarizeStep(const proto::WorkloadTrace& trace, const TraceAlgorithms& algorithms);

// What `rank`, a member of `group`, sends in communication `op` run by
// `algorithm`: a send-receive's vector from the pair's first rank (nothing
// from its second), a collective's closed form shared by the group's ranks.
double SentInOp(const proto::WorkloadOp& op, const Collective& algorithm,
                const proto::RankGroup& group, std::uint32_t rank);

// The course's closed form of what rank `rank` sends per step for the
// (role, kind) pair, for the ring algorithms; nullopt where the trace was not
// generated or the pair has none. Independent of the generator's loop: it
// reads only the model's sizes and the layout (docs/workloads.md gives each).
std::optional<double> CourseBytes(const proto::WorkloadTrace& trace, int rank,
                                  proto::CommunicatorRole::Kind role,
                                  proto::WorkloadOp::Kind kind);

}  // namespace testbed
