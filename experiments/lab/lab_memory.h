// The lab's Memory part: the course's calculators (their one implementation
// is experiments/workload/memory_calculator.h) as the page's JSON, and each
// ZeRO stage's communication from collectives measured on the lab's cluster.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "experiments/workload/memory_calculator.h"

namespace testbed {

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
// gradient vector, summed as the calculator's stage says (ZeroStage's counts:
// DDP one all-reduce, stage 1 an all-reduce and an all-gather, stage 2 a
// reduce-scatter and an all-gather, stage 3 one all-gather more).
std::vector<MeasuredZeroStage> ZeroTrafficOf(MeasuredCollective all_reduce,
                                             MeasuredCollective reduce_scatter,
                                             MeasuredCollective all_gather);

// Both calculators as one JSON object, for the page; GB are 1e9 bytes.
std::string MemoryJson(double parameters, int gpus, int stages, int micro_batches);

}  // namespace testbed
