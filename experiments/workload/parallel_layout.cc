#include "experiments/workload/parallel_layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/limits.h"

namespace testbed {
namespace {

int OrOne(std::uint32_t value) { return value == 0 ? 1 : static_cast<int>(value); }

}  // namespace

absl::StatusOr<ParallelLayout> LayoutOf(const proto::ParallelStrategy& s, const ModelCost& model) {
  ParallelLayout layout;
  layout.tensor = OrOne(s.tensor_parallel());
  layout.pipeline = OrOne(s.pipeline_parallel());
  layout.data = OrOne(s.data_parallel());
  layout.micro_batches = OrOne(s.micro_batches());
  layout.schedule = s.pipeline_schedule();
  layout.zero_stage = static_cast<int>(s.zero_stage());
  if (s.bucket_bytes() != 0) layout.bucket_bytes = s.bucket_bytes();
  const std::int64_t world = std::int64_t{layout.tensor} * layout.pipeline * layout.data;
  if (world > kMaxSimulatedWorkers) {
    return absl::InvalidArgumentError(absl::StrCat("t·p·d = ", world, " ranks; at most ",
                                                   kMaxSimulatedWorkers));
  }
  if (layout.micro_batches > kMaxMicroBatches) {
    return absl::InvalidArgumentError(
        absl::StrCat("at most ", kMaxMicroBatches, " micro-batches, not ", layout.micro_batches));
  }
  if (layout.zero_stage > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("ZeRO stages are 0 (DDP) to 3, not ", layout.zero_stage));
  }
  if (layout.zero_stage >= 2 && layout.pipeline > 1) {
    return absl::InvalidArgumentError(
        "ZeRO stages 2 and 3 shard gradients that a pipeline accumulates over its micro-batches; "
        "with pipeline parallelism take stage 0 or 1 (DeepSpeed's rule)");
  }
  if (layout.tensor > 1 && !model.splits_over_tensor_parallel) {
    return absl::InvalidArgumentError(
        "tensor parallelism splits a transformer's layers; the MLP takes t = 1");
  }
  if (model.tensor_parallel_divisor % layout.tensor != 0) {
    return absl::InvalidArgumentError(absl::StrCat("t = ", layout.tensor,
                                                   " must divide the hidden size ",
                                                   model.tensor_parallel_divisor));
  }
  if (layout.bucket_bytes < 8) {
    return absl::InvalidArgumentError("a gradient bucket holds at least 8 bytes");
  }
  return layout;
}

absl::StatusOr<std::vector<StageLayers>> SplitIntoStages(const ModelCost& model, int stages) {
  const int layers = static_cast<int>(model.layers.size());
  // A transformer's embedding and logits ride with the first and last stage.
  const int anchored = model.splits_over_tensor_parallel ? 1 : 0;
  const int dealt = layers - 2 * anchored;
  if (dealt < stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "p = ", stages, " stages need at least as many ",
        anchored ? "transformer blocks" : "layers", "; the model has ", dealt));
  }
  std::vector<StageLayers> split(static_cast<std::size_t>(stages));
  int next = anchored;
  for (int s = 0; s < stages; ++s) {
    const int take = dealt / stages + (s < dealt % stages ? 1 : 0);
    split[s].begin = s == 0 ? 0 : next;
    next += take;
    split[s].end = s == stages - 1 ? layers : next;
  }
  return split;
}

}  // namespace testbed
