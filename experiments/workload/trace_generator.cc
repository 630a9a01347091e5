#include "experiments/workload/trace_generator.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/data_type.h"
#include "experiments/workload/model_cost.h"
#include "experiments/workload/parallel_layout.h"
#include "experiments/workload/workload_trace.h"
#include "proto/spec.h"

namespace testbed {
namespace {

using Op = proto::WorkloadOp;
using OpId = std::uint32_t;
using Deps = std::vector<OpId>;
constexpr OpId kNone = std::numeric_limits<OpId>::max();

// A stage's program: forward or backward of a micro-batch, in its order.
struct Task {
  bool forward = true;
  int micro = 0;
};

std::vector<Task> StageProgram(const ParallelLayout& layout, int stage) {
  const int m = layout.micro_batches;
  std::vector<Task> program;
  if (layout.schedule == proto::PipelineSchedule::gpipe) {
    for (int j = 0; j < m; ++j) program.push_back({true, j});
    for (int j = m - 1; j >= 0; --j) program.push_back({false, j});
    return program;
  }
  // 1F1B: fill the pipeline, then one forward and one backward in turn.
  const int warmup = std::min(layout.pipeline - 1 - stage, m);
  for (int j = 0; j < warmup; ++j) program.push_back({true, j});
  for (int j = warmup; j < m; ++j) {
    program.push_back({true, j});
    program.push_back({false, j - warmup});
  }
  for (int j = m - warmup; j < m; ++j) program.push_back({false, j});
  return program;
}

class TraceBuilder {
 public:
  TraceBuilder(const proto::Workload& workload, ParallelLayout layout, ModelCost model,
               std::vector<StageLayers> stages)
      : layout_(layout), model_(std::move(model)), stages_(std::move(stages)) {
    trace_.set_version(kWorkloadTraceVersion);
    trace_.set_world_size(static_cast<std::uint32_t>(layout_.world_size()));
    trace_.set_dtype(workload.dtype());
    *trace_.mutable_generated_from() = workload;
    trace_.set_parameters(static_cast<double>(model_.parameters));
    element_ = static_cast<std::int64_t>(ElementSize(DataTypeOf(workload.dtype())));
    state_.resize(stages_.size());
    for (StageState& s : state_) {
      s.forward_send.assign(static_cast<std::size_t>(layout_.micro_batches), kNone);
      s.backward_send = s.forward_send;
    }
  }

  absl::StatusOr<proto::WorkloadTrace> Build() {
    AddCommunicators();
    const int p = layout_.pipeline;
    std::vector<std::vector<Task>> programs;
    for (int s = 0; s < p; ++s) programs.push_back(StageProgram(layout_, s));
    std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
    for (std::size_t left = 2 * static_cast<std::size_t>(p * layout_.micro_batches); left > 0;) {
      bool progress = false;
      for (int s = 0; s < p; ++s) {
        const std::vector<Task>& program = programs[s];
        while (next[s] < program.size() && Ready(s, program[next[s]])) {
          const bool last = next[s] + 1 == program.size();
          if (program[next[s]].forward) {
            Forward(s, program[next[s]].micro);
          } else {
            Backward(s, program[next[s]].micro, last);
          }
          if (last) UpdateWeights(s);
          ++next[s];
          --left;
          progress = true;
        }
      }
      if (!progress) return absl::InternalError("the pipeline's schedule deadlocked");
      if (trace_.ops_size() > kMaxWorkloadOps) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the step has over ", kMaxWorkloadOps, " operations: fewer micro-batches or layers"));
      }
    }
    return std::move(trace_);
  }

 private:
  struct StageState {
    Deps chain;                       // what the stage's next compute waits on
    std::vector<OpId> forward_send;   // per micro-batch: activations to the next stage
    std::vector<OpId> backward_send;  // per micro-batch: the gradient to the one before
    std::uint64_t bucket_fill = 0;    // gradient bytes waiting for the next bucket
    std::vector<std::pair<OpId, std::uint64_t>> reductions;  // each bucket's op, bytes
    std::uint32_t tensor = 0, data = 0, compute = 0, forward = 0, backward = 0;
  };

  bool has_tensor() const { return layout_.tensor > 1; }
  bool has_data() const { return layout_.data > 1; }
  bool zero3() const { return layout_.zero_stage == 3 && has_data(); }
  std::uint64_t RankBytes(int layer) const {
    return static_cast<std::uint64_t>(model_.layers[layer].parameters / layout_.tensor *
                                      element_);
  }
  std::string StageName(std::string_view what, int s) const {
    return layout_.pipeline == 1 ? std::string(what) : absl::StrCat(std::string(what), " stage ", s);
  }

  std::uint32_t AddCommunicator(std::string name, proto::CommunicatorRole::Kind role,
                                const std::vector<std::vector<int>>& groups) {
    proto::Communicator& c = *trace_.add_communicators();
    c.set_name(std::move(name));
    c.set_role(role);
    for (const std::vector<int>& group : groups) {
      proto::RankGroup& g = *c.add_groups();
      for (int rank : group) g.add_ranks(static_cast<std::uint32_t>(rank));
    }
    return static_cast<std::uint32_t>(trace_.communicators_size() - 1);
  }

  void AddCommunicators() {
    const ParallelLayout& l = layout_;
    for (int s = 0; s < l.pipeline; ++s) {
      std::vector<std::vector<int>> tensor, data(static_cast<std::size_t>(l.tensor)), fwd, bwd;
      std::vector<int> everyone;
      for (int dp = 0; dp < l.data; ++dp) {
        tensor.emplace_back();
        for (int tp = 0; tp < l.tensor; ++tp) {
          const int rank = l.RankOf(tp, dp, s);
          everyone.push_back(rank);
          tensor.back().push_back(rank);
          data[tp].push_back(rank);
          if (s + 1 < l.pipeline) {
            fwd.push_back({rank, l.RankOf(tp, dp, s + 1)});
            bwd.push_back({l.RankOf(tp, dp, s + 1), rank});
          }
        }
      }
      StageState& st = state_[s];
      st.compute = AddCommunicator(StageName("compute", s), proto::CommunicatorRole::stage,
                                   {everyone});
      if (has_tensor()) {
        st.tensor = AddCommunicator(StageName("tp", s), proto::CommunicatorRole::tensor_parallel,
                                    tensor);
      }
      if (has_data()) {
        st.data = AddCommunicator(StageName("dp", s), proto::CommunicatorRole::data_parallel,
                                  data);
      }
      if (s + 1 < l.pipeline) {
        st.forward = AddCommunicator(absl::StrCat("pp ", s, "->", s + 1),
                                     proto::CommunicatorRole::pipeline, fwd);
        st.backward = AddCommunicator(absl::StrCat("pp ", s + 1, "->", s),
                                      proto::CommunicatorRole::pipeline, bwd);
      }
    }
  }

  OpId AddOp(Op::Kind kind, std::uint32_t communicator, std::uint64_t bytes, double flops,
             const Deps& deps, std::string label, int micro) {
    Op& op = *trace_.add_ops();
    op.set_kind(kind);
    op.set_communicator(communicator);
    op.set_bytes(bytes);
    op.set_flops(flops);
    for (OpId dep : deps) {
      if (dep != kNone) op.add_deps(dep);
    }
    op.set_label(std::move(label));
    op.set_micro_batch(static_cast<std::uint32_t>(micro));
    return static_cast<OpId>(trace_.ops_size() - 1);
  }

  bool Ready(int s, const Task& task) const {
    if (task.forward) return s == 0 || state_[s - 1].forward_send[task.micro] != kNone;
    return s + 1 == layout_.pipeline || state_[s + 1].backward_send[task.micro] != kNone;
  }

  // One layer's compute parts in order, each followed by its tensor-parallel
  // all-reduce; returns its first compute (a prefetch's trigger) and leaves
  // `deps` on what comes after.
  OpId LayerCompute(int s, int layer, int micro, bool forward, Deps& deps) {
    const LayerCost& cost = model_.layers[layer];
    const StageState& st = state_[s];
    OpId first = kNone;
    const int parts = static_cast<int>(cost.parts.size());
    for (int i = 0; i < parts; ++i) {
      const ComputePart& part = cost.parts[forward ? i : parts - 1 - i];
      const double flops = (forward ? 1.0 : 2.0) * part.forward_flops / layout_.tensor;
      const OpId c = AddOp(Op::compute, st.compute, 0, flops, deps,
                           absl::StrCat(cost.name, " ", std::string(part.name),
                                        forward ? " forward" : " backward"),
                           micro);
      if (first == kNone) first = c;
      deps = {c};
      last_compute_ = c;
      if (part.tensor_parallel_all_reduce && has_tensor()) {
        deps = {AddOp(Op::all_reduce, st.tensor,
                      static_cast<std::uint64_t>(cost.output_elements * element_), 0, {c},
                      absl::StrCat(cost.name, " ", std::string(part.name), forward ? " forward" : " backward",
                                   " activations"),
                      micro)};
      }
    }
    return first;
  }

  // ZeRO 3: the layer's weights gathered before its compute, once the layer
  // before it (in this pass's order) began.
  void GatherWeights(int s, int layer, int micro, bool forward, OpId after, Deps& deps) {
    if (!zero3() || RankBytes(layer) == 0) return;
    deps.push_back(AddOp(Op::all_gather, state_[s].data, RankBytes(layer), 0, {after},
                         absl::StrCat(model_.layers[layer].name, " weights",
                                      forward ? " (forward)" : " (backward)"),
                         micro));
  }

  void Forward(int s, int micro) {
    StageState& st = state_[s];
    Deps deps = st.chain;
    if (s > 0) deps.push_back(state_[s - 1].forward_send[micro]);
    OpId previous_layer = kNone;
    for (int l = stages_[s].begin; l < stages_[s].end; ++l) {
      GatherWeights(s, l, micro, true, previous_layer, deps);
      previous_layer = LayerCompute(s, l, micro, true, deps);
    }
    st.chain = deps;
    if (s + 1 < layout_.pipeline) {
      const std::int64_t elements = model_.layers[stages_[s].end - 1].output_elements;
      st.forward_send[micro] =
          AddOp(Op::send_recv, st.forward, static_cast<std::uint64_t>(elements * element_), 0,
                deps, absl::StrCat("activations to stage ", s + 1), micro);
    }
  }

  void Backward(int s, int micro, bool last) {
    StageState& st = state_[s];
    Deps deps = st.chain;
    if (s + 1 < layout_.pipeline) deps.push_back(state_[s + 1].backward_send[micro]);
    OpId next_layer = kNone;
    for (int l = stages_[s].end - 1; l >= stages_[s].begin; --l) {
      GatherWeights(s, l, micro, false, next_layer, deps);
      next_layer = LayerCompute(s, l, micro, false, deps);
      if (last && has_data()) ReduceGradient(s, l, micro);
    }
    if (last && has_data() && st.bucket_fill > 0) FlushBucket(s, micro);
    st.chain = deps;
    if (s > 0) {
      const std::int64_t elements = model_.layers[stages_[s].begin - 1].output_elements;
      st.backward_send[micro] =
          AddOp(Op::send_recv, state_[s - 1].backward, static_cast<std::uint64_t>(elements * element_),
                0, deps, absl::StrCat("gradient to stage ", s - 1), micro);
    }
  }

  // The step's last backward made layer l's gradient final.
  void ReduceGradient(int s, int layer, int micro) {
    if (RankBytes(layer) == 0) return;
    if (zero3()) {
      AddOp(Op::reduce_scatter, state_[s].data, RankBytes(layer), 0, {last_compute_},
            absl::StrCat(model_.layers[layer].name, " gradient"), micro);
      return;
    }
    StageState& st = state_[s];
    st.bucket_fill += RankBytes(layer);
    if (st.bucket_fill >= layout_.bucket_bytes) FlushBucket(s, micro);
  }

  void FlushBucket(int s, int micro) {
    StageState& st = state_[s];
    const Op::Kind kind = layout_.zero_stage >= 2 ? Op::reduce_scatter : Op::all_reduce;
    const OpId op = AddOp(kind, st.data, st.bucket_fill, 0, {last_compute_},
                          absl::StrCat("gradient bucket ", st.reductions.size()), micro);
    st.reductions.emplace_back(op, st.bucket_fill);
    st.bucket_fill = 0;
  }

  // ZeRO 1 and 2: each rank updated its shard of every bucket; all gather them.
  void UpdateWeights(int s) {
    if (!has_data() || (layout_.zero_stage != 1 && layout_.zero_stage != 2)) return;
    const StageState& st = state_[s];
    for (std::size_t b = 0; b < st.reductions.size(); ++b) {
      AddOp(Op::all_gather, st.data, st.reductions[b].second, 0, {st.reductions[b].first},
            absl::StrCat("updated weights bucket ", b), layout_.micro_batches - 1);
    }
  }

  ParallelLayout layout_;
  ModelCost model_;
  std::vector<StageLayers> stages_;
  std::int64_t element_ = 4;
  std::vector<StageState> state_;
  OpId last_compute_ = kNone;
  proto::WorkloadTrace trace_;
};

}  // namespace

absl::StatusOr<proto::WorkloadTrace> GenerateTrace(const proto::Workload& workload) {
  if (!proto::Dtype::Kind_IsValid(workload.dtype())) {
    return absl::InvalidArgumentError("unknown dtype");
  }
  absl::StatusOr<ModelCost> model = CostOfModel(workload);
  if (!model.ok()) return model.status();
  absl::StatusOr<ParallelLayout> layout = LayoutOf(workload.strategy(), *model);
  if (!layout.ok()) return layout.status();
  absl::StatusOr<std::vector<StageLayers>> stages = SplitIntoStages(*model, layout->pipeline);
  if (!stages.ok()) return stages.status();
  return TraceBuilder(workload, *layout, *std::move(model), *std::move(stages)).Build();
}

}  // namespace testbed
