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

// Both calculators as one JSON object, for the page; GB are 1e9 bytes.
std::string MemoryJson(double parameters, int gpus, int stages, int micro_batches);

}  // namespace testbed
