// The course's memory calculators: ZeRO stages 0-3 with mixed-precision Adam
// (16 bytes per parameter: 2 for fp16 weights, 2 for fp16 gradients, K = 12
// for the optimizer's fp32 weights, momentum and variance), and the pipeline
// bubble of GPipe and 1F1B.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace testbed {

struct ZeroStage {
  int stage = 0;
  std::string_view sharded;   // what the stage splits over the GPUs
  double bytes_per_gpu = 0;   // weights + gradients + optimizer state on one card
  double traffic_vs_ddp = 1;  // communication volume relative to DDP's all-reduce
};

// Stages 0 (DDP) to 3 for `parameters` on `gpus` cards.
std::vector<ZeroStage> ZeroMemory(double parameters, int gpus);

struct PipelineBubble {
  double bubble_fraction = 0;  // (p - 1) / (m + p - 1), the same for GPipe and 1F1B
  int gpipe_activations = 0;   // micro-batches whose activations a stage holds at once
  int one_f_one_b_activations = 0;
};

// p stages, m micro-batches (both >= 1).
PipelineBubble PipelineBubbleOf(int stages, int micro_batches);

// What one collective measured on the lab's cluster: payload bytes of all
// ranks and the average time of one call.
struct MeasuredCollective {
  double bytes = 0;
  double time_us = 0;
};

struct MeasuredZeroStage {
  int stage = 0;
  std::string_view collectives;  // what one step communicates
  double bytes = 0;
  double time_us = 0;
  double bytes_vs_ddp = 1;  // measured, against stage 0's all-reduce
  double time_vs_ddp = 1;
  double model_vs_ddp = 1;  // the calculator's ZeroStage::traffic_vs_ddp
};

// Each stage's communication per step, from measured collectives of the same
// gradient vector: DDP all-reduces it; stages 1 and 2 reduce-scatter it and
// all-gather the updated weights; stage 3 all-gathers the weights once more,
// for the backward pass.
std::vector<MeasuredZeroStage> ZeroTrafficOf(MeasuredCollective all_reduce,
                                             MeasuredCollective reduce_scatter,
                                             MeasuredCollective all_gather);

// Both calculators as one JSON object, for the page; GB are 1e9 bytes.
std::string MemoryJson(double parameters, int gpus, int stages, int micro_batches);

}  // namespace testbed
