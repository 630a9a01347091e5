#include "experiments/workload/step_summary.h"

#include <algorithm>
#include <map>
#include <utility>

#include "experiments/workload/model_cost.h"
#include "experiments/workload/parallel_layout.h"
#include "experiments/workload/workload_trace.h"

namespace testbed {
namespace {

using Kind = proto::WorkloadOp::Kind;
using Role = proto::CommunicatorRole::Kind;

// A generated trace's model, layout and stages, read back from generated_from.
struct Generated {
  ModelCost model;
  ParallelLayout layout;
  std::vector<StageLayers> stages;
};

std::optional<Generated> GeneratedOf(const proto::WorkloadTrace& trace) {
  if (!trace.has_generated_from()) return std::nullopt;
  absl::StatusOr<ModelCost> model = CostOfModel(trace.generated_from());
  if (!model.ok()) return std::nullopt;
  absl::StatusOr<ParallelLayout> layout = LayoutOf(trace.generated_from().strategy(), *model);
  if (!layout.ok() || layout->world_size() != static_cast<int>(trace.world_size())) {
    return std::nullopt;
  }
  absl::StatusOr<std::vector<StageLayers>> stages = SplitIntoStages(*model, layout->pipeline);
  if (!stages.ok()) return std::nullopt;
  return Generated{*std::move(model), *layout, *std::move(stages)};
}

double StageParameters(const Generated& g, int stage) {
  double sum = 0;
  for (int l = g.stages[stage].begin; l < g.stages[stage].end; ++l) {
    sum += static_cast<double>(g.model.layers[l].parameters);
  }
  return sum / g.layout.tensor;
}

std::optional<double> DataParallelBytes(const Generated& g, int stage, Kind kind, double e) {
  const ParallelLayout& l = g.layout;
  if (l.data == 1) return std::nullopt;
  const ZeroStage zero = ZeroMemory(1, 1)[static_cast<std::size_t>(l.zero_stage)];
  // ZeRO 3 gathers the weights for every micro-batch's forward and backward.
  const int gathers = l.zero_stage == 3 ? zero.all_gathers * l.micro_batches : zero.all_gathers;
  const double share = static_cast<double>(l.data - 1) / l.data * StageParameters(g, stage) * e;
  switch (kind) {
    case proto::WorkloadOp::all_reduce: return zero.all_reduces * 2 * share;
    case proto::WorkloadOp::reduce_scatter: return zero.reduce_scatters * share;
    case proto::WorkloadOp::all_gather: return gathers * share;
    default: return std::nullopt;
  }
}

// Megatron-LM's four all-reduces of b·s·h per block per micro-batch.
std::optional<double> TensorParallelBytes(const proto::Workload& w, const Generated& g, int stage,
                                          double e) {
  const ParallelLayout& l = g.layout;
  if (!w.has_transformer() || l.tensor == 1) return std::nullopt;
  const proto::TransformerModel& m = w.transformer();
  const int blocks =
      static_cast<int>(m.layers()) / l.pipeline + (stage < static_cast<int>(m.layers()) % l.pipeline);
  const double activations = static_cast<double>(m.micro_batch()) * m.sequence() * m.hidden() * e;
  return 4.0 * l.micro_batches * blocks * 2.0 * (l.tensor - 1) / l.tensor * activations;
}

// Each micro-batch's activations forward (not from the last stage) and its
// gradient back (not from the first).
double PipelineBytes(const Generated& g, int stage, double e) {
  const ParallelLayout& l = g.layout;
  double bytes = 0;
  if (stage + 1 < l.pipeline) {
    bytes += static_cast<double>(g.model.layers[g.stages[stage].end - 1].output_elements);
  }
  if (stage > 0) {
    bytes += static_cast<double>(g.model.layers[g.stages[stage].begin - 1].output_elements);
  }
  return bytes * e * l.micro_batches;
}

// Forward once, backward twice, for every micro-batch, split t ways.
double ComputeFlops(const Generated& g, int stage) {
  double forward = 0;
  for (int l = g.stages[stage].begin; l < g.stages[stage].end; ++l) {
    for (const ComputePart& part : g.model.layers[l].parts) forward += part.forward_flops;
  }
  return 3.0 * forward * g.layout.micro_batches / g.layout.tensor;
}

}  // namespace

TraceAlgorithms DefaultTraceAlgorithms() {
  return {FindCollective("ring"), FindCollective("reduce-scatter"), FindCollective("all-gather"),
          FindCollective("broadcast")};
}

const Collective* AlgorithmOf(const TraceAlgorithms& algorithms, Kind kind) {
  switch (kind) {
    case proto::WorkloadOp::all_reduce: return algorithms.all_reduce;
    case proto::WorkloadOp::reduce_scatter: return algorithms.reduce_scatter;
    case proto::WorkloadOp::all_gather: return algorithms.all_gather;
    case proto::WorkloadOp::send_recv: return algorithms.send_recv;
    default: return nullptr;
  }
}

namespace {

// CourseBytes for a trace whose model and layout are already read back.
std::optional<double> CourseBytesOf(const proto::WorkloadTrace& trace,
                                    const std::optional<Generated>& g, int rank, Role role,
                                    Kind kind) {
  if (!g) return std::nullopt;
  const int stage = g->layout.StageOf(rank);
  const auto e = static_cast<double>(TraceElementBytes(trace));
  switch (role) {
    case proto::CommunicatorRole::data_parallel: return DataParallelBytes(*g, stage, kind, e);
    case proto::CommunicatorRole::tensor_parallel:
      if (kind != proto::WorkloadOp::all_reduce) return std::nullopt;
      return TensorParallelBytes(trace.generated_from(), *g, stage, e);
    case proto::CommunicatorRole::pipeline:
      if (kind != proto::WorkloadOp::send_recv) return std::nullopt;
      return PipelineBytes(*g, stage, e);
    case proto::CommunicatorRole::stage:
      if (kind != proto::WorkloadOp::compute) return std::nullopt;
      return ComputeFlops(*g, stage);
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<double> CourseBytes(const proto::WorkloadTrace& trace, int rank, Role role,
                                  Kind kind) {
  return CourseBytesOf(trace, GeneratedOf(trace), rank, role, kind);
}

double SentInOp(const proto::WorkloadOp& op, const Collective& algorithm,
                const proto::RankGroup& group, std::uint32_t rank) {
  if (op.kind() == proto::WorkloadOp::send_recv) {
    return group.ranks(0) == rank ? static_cast<double>(op.bytes()) : 0;
  }
  const int size = group.ranks_size();
  return static_cast<double>(algorithm.formula_bytes(size, static_cast<std::int64_t>(op.bytes()))) /
         size;
}

StepSummary SummarizeStep(const proto::WorkloadTrace& trace, const TraceAlgorithms& algorithms) {
  const auto world = static_cast<std::size_t>(trace.world_size());
  const std::optional<Generated> generated = GeneratedOf(trace);
  StepSummary summary;
  summary.sent_per_rank.assign(world, 0);
  summary.flops_per_rank.assign(world, 0);
  std::map<std::pair<int, int>, std::pair<TrafficLine, std::vector<double>>> lines;
  for (const proto::WorkloadOp& op : trace.ops()) {
    const proto::Communicator& c = trace.communicators(static_cast<int>(op.communicator()));
    auto& [line, per_rank] = lines[{c.role(), op.kind()}];
    if (per_rank.empty()) {
      per_rank.assign(world, 0);
      line.role = c.role();
      line.kind = op.kind();
    }
    ++line.ops;
    line.vector_bytes += op.bytes();
    const Collective* algorithm = AlgorithmOf(algorithms, op.kind());
    for (const proto::RankGroup& group : c.groups()) {
      for (std::uint32_t r : group.ranks()) {
        per_rank[r] += op.kind() == proto::WorkloadOp::compute
                           ? op.flops()
                           : SentInOp(op, *algorithm, group, r);
      }
    }
  }
  for (auto& [key, entry] : lines) {
    auto& [line, per_rank] = entry;
    const bool compute = line.kind == proto::WorkloadOp::compute;
    for (std::size_t r = 0; r < world; ++r) {
      (compute ? line.flops : line.sent_bytes) += per_rank[r];
      (compute ? summary.flops_per_rank : summary.sent_per_rank)[r] += per_rank[r];
    }
    const auto busiest = std::max_element(per_rank.begin(), per_rank.end());
    line.busiest_rank = static_cast<int>(busiest - per_rank.begin());
    line.busiest = *busiest;
    line.closed_form = CourseBytesOf(trace, generated, line.busiest_rank, line.role, line.kind);
    summary.lines.push_back(line);
  }
  if (const std::optional<Generated>& g = generated) {
    for (int s = 0; s < g->layout.pipeline; ++s) {
      summary.card_parameters = std::max(summary.card_parameters, StageParameters(*g, s));
    }
    summary.zero_stage = g->layout.zero_stage;
    summary.data_parallel = g->layout.data;
    summary.memory = ZeroMemory(summary.card_parameters, g->layout.data);
    if (g->layout.pipeline > 1) {
      summary.bubble = PipelineBubbleOf(g->layout.pipeline, g->layout.micro_batches);
    }
  }
  return summary;
}

}  // namespace testbed
