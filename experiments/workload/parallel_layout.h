// Where a parallel strategy puts its ranks and layers (docs/workloads.md):
// N = t·p·d ranks numbered tensor-parallel index fastest, then data-parallel
// index, then pipeline stage (Megatron-LM's order), and a model's layers cut
// into p stages. The trace generator, the closed forms and the replay read
// the same layout, so they agree on who is where.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/workload/model_cost.h"
#include "proto/workload.pb.h"

namespace testbed {

// PyTorch DDP's bucket_cap_mb default.
inline constexpr std::uint64_t kDefaultBucketBytes = 25 << 20;
inline constexpr int kMaxMicroBatches = 1024;

struct ParallelLayout {
  int tensor = 1;    // t
  int pipeline = 1;  // p
  int data = 1;      // d
  int micro_batches = 1;
  proto::PipelineSchedule::Kind schedule = proto::PipelineSchedule::one_f_one_b;
  int zero_stage = 0;
  std::uint64_t bucket_bytes = kDefaultBucketBytes;

  int world_size() const { return tensor * pipeline * data; }
  int RankOf(int tp, int dp, int stage) const { return tp + tensor * (dp + data * stage); }
  int StageOf(int rank) const { return rank / (tensor * data); }
};

// The strategy with its defaults filled (0: 1; bucket 0: 25 MiB), checked
// against the model: t divides what the model splits (a transformer's
// hidden size; an MLP takes no tensor parallelism), ZeRO stages 2 and 3 only
// without a pipeline (DeepSpeed's rule: their gradient and weight shards
// would be reduced once per micro-batch), N within the simulator's limit.
absl::StatusOr<ParallelLayout> LayoutOf(const proto::ParallelStrategy& strategy,
                                        const ModelCost& model);

// Layer indices [begin, end) of each stage: a transformer's blocks dealt as
// evenly as they go (the first stages take one more), its embedding on the
// first stage and its logits on the last; an MLP's layers dealt alike.
struct StageLayers {
  int begin = 0;
  int end = 0;
};
absl::StatusOr<std::vector<StageLayers>> SplitIntoStages(const ModelCost& model, int stages);

}  // namespace testbed
