#include "experiments/lab/lab_memory.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "experiments/results/table.h"

namespace testbed {
namespace {

// Bytes per parameter, the course's accounting.
constexpr double kWeightBytes = 2;     // fp16 weights
constexpr double kGradientBytes = 2;   // fp16 gradients
constexpr double kOptimizerBytes = 12; // K: fp32 weights, momentum, variance

}  // namespace

std::vector<ZeroStage> ZeroMemory(double parameters, int gpus) {
  const double n = gpus;
  const double w = kWeightBytes * parameters;
  const double g = kGradientBytes * parameters;
  const double o = kOptimizerBytes * parameters;
  // Stages 1 and 2 replace the all-reduce by reduce-scatter + all-gather: the
  // same volume. Stage 3 all-gathers the weights again for the backward pass.
  return {
      {0, "nothing (DDP)", w + g + o, 1.0},
      {1, "optimizer state", w + g + o / n, 1.0},
      {2, "optimizer state, gradients", w + (g + o) / n, 1.0},
      {3, "optimizer state, gradients, weights", (w + g + o) / n, 1.5},
  };
}

std::vector<MeasuredZeroStage> ZeroTrafficOf(MeasuredCollective all_reduce,
                                             MeasuredCollective reduce_scatter,
                                             MeasuredCollective all_gather) {
  const std::vector<ZeroStage> model = ZeroMemory(/*parameters=*/1, /*gpus=*/1);
  const auto stage = [&](int number, std::string_view collectives, int all_gathers) {
    const MeasuredCollective step{
        reduce_scatter.bytes + all_gathers * all_gather.bytes,
        reduce_scatter.time_us + all_gathers * all_gather.time_us};
    return MeasuredZeroStage{number,
                             collectives,
                             step.bytes,
                             step.time_us,
                             all_reduce.bytes > 0 ? step.bytes / all_reduce.bytes : 0,
                             all_reduce.time_us > 0 ? step.time_us / all_reduce.time_us : 0,
                             model[number].traffic_vs_ddp};
  };
  return {
      {0, "all-reduce", all_reduce.bytes, all_reduce.time_us, 1, 1, model[0].traffic_vs_ddp},
      stage(1, "reduce-scatter + all-gather", 1),
      stage(2, "reduce-scatter + all-gather", 1),
      stage(3, "reduce-scatter + 2 all-gathers", 2),
  };
}

PipelineBubble PipelineBubbleOf(int stages, int micro_batches) {
  return {
      .bubble_fraction = static_cast<double>(stages - 1) / (micro_batches + stages - 1),
      // GPipe runs every forward before any backward; 1F1B starts backwards
      // once the pipeline is full, so a stage holds at most p in flight.
      .gpipe_activations = micro_batches,
      .one_f_one_b_activations = std::min(stages, micro_batches),
  };
}

std::string MemoryJson(double parameters, int gpus, int stages, int micro_batches) {
  std::vector<std::string> zero;
  for (const ZeroStage& s : ZeroMemory(parameters, gpus)) {
    zero.push_back(absl::StrCat("{\"stage\":", s.stage, ",\"sharded\":", JsonString(s.sharded),
                                ",\"gb_per_gpu\":", s.bytes_per_gpu / 1e9,
                                ",\"traffic_vs_ddp\":", s.traffic_vs_ddp, "}"));
  }
  const PipelineBubble bubble = PipelineBubbleOf(stages, micro_batches);
  return absl::StrCat(
      "{\"params\":", parameters, ",\"gpus\":", gpus, ",\"bytes_per_param\":",
      kWeightBytes + kGradientBytes + kOptimizerBytes, ",\"zero\":[", absl::StrJoin(zero, ","),
      "],\"pipeline\":{\"stages\":", stages, ",\"micro_batches\":", micro_batches,
      ",\"bubble\":", bubble.bubble_fraction, ",\"gpipe_activations\":", bubble.gpipe_activations,
      ",\"one_f_one_b_activations\":", bubble.one_f_one_b_activations, "}}");
}

}  // namespace testbed
