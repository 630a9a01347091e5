// The course's calculators, one implementation for `testbed workload` and the
// lab (experiments/lab/lab_memory.h): what each ZeRO stage keeps on a card
// and communicates per step, with mixed-precision Adam (16 bytes per
// parameter: 2 for fp16 weights, 2 for fp16 gradients, K = 12 for the
// optimizer's fp32 weights, momentum and variance), and the pipeline bubble
// of GPipe and 1F1B.
//
// A stage's communication, in vectors of the card's parameters per step:
// DDP all-reduces the gradients; stage 1 does too (its gradients stay whole
// on every card), then all-gathers the weights each card updated in its
// shard: 1.5x DDP; stage 2 reduce-scatters the gradients instead (each card
// keeps only its shard's), then all-gathers: 1x; stage 3 all-gathers the
// weights before the forward and again before the backward, and
// reduce-scatters the gradients: 1.5x. (ZeRO's paper, Rajbhandari et al.
// 2020, sec. 7, gives stage 1 stage 2's reduce-scatter, so 1x; the course
// and PyTorch's ZeroRedundancyOptimizer keep DDP's all-reduce.)
//
// Thread-safety: pure functions.
#pragma once

#include <string_view>
#include <vector>

namespace testbed {

inline constexpr double kBytesPerParameter = 16;  // 2 + 2 + K = 12

struct ZeroStage {
  int stage = 0;
  std::string_view sharded;      // what the stage splits over the cards
  std::string_view collectives;  // what one step communicates
  double bytes_per_gpu = 0;      // weights + gradients + optimizer state on one card
  // Collectives of the whole vector per step (one micro-batch).
  int all_reduces = 0;
  int reduce_scatters = 0;
  int all_gathers = 0;
  double traffic_vs_ddp = 1;  // their volume against DDP's all-reduce
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

}  // namespace testbed
