#include "experiments/workload/memory_calculator.h"

#include <algorithm>

namespace testbed {
namespace {

// Bytes per parameter, the course's accounting.
constexpr double kWeightBytes = 2;      // fp16 weights
constexpr double kGradientBytes = 2;    // fp16 gradients
constexpr double kOptimizerBytes = 12;  // K: fp32 weights, momentum, variance
static_assert(kWeightBytes + kGradientBytes + kOptimizerBytes == kBytesPerParameter);

ZeroStage Stage(int number, std::string_view sharded, std::string_view collectives,
                double bytes, int all_reduces, int reduce_scatters, int all_gathers) {
  // A ring all-reduce moves twice what a reduce-scatter or an all-gather does.
  const double volume = 2.0 * all_reduces + reduce_scatters + all_gathers;
  return {number,       sharded,         collectives, bytes, all_reduces, reduce_scatters,
          all_gathers, volume / 2.0};
}

}  // namespace

std::vector<ZeroStage> ZeroMemory(double parameters, int gpus) {
  const double n = gpus;
  const double w = kWeightBytes * parameters;
  const double g = kGradientBytes * parameters;
  const double o = kOptimizerBytes * parameters;
  return {
      Stage(0, "nothing (DDP)", "all-reduce", w + g + o, 1, 0, 0),
      Stage(1, "optimizer state", "all-reduce + all-gather", w + g + o / n, 1, 0, 1),
      Stage(2, "optimizer state, gradients", "reduce-scatter + all-gather", w + (g + o) / n, 0,
            1, 1),
      Stage(3, "optimizer state, gradients, weights", "reduce-scatter + 2 all-gathers",
            (w + g + o) / n, 0, 1, 2),
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

}  // namespace testbed
