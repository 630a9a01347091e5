// GradientSync through the parameter server (PsClient): every worker pushes
// its gradient of a step, the shards average the N gradients and apply the
// optimizer to their slices, and every worker pulls the result.
//
// Modes (PsMode, `testbed train --ps-mode`): sync, the above; async and
// ssp:K, where the shards apply each push on its own, divided by N, as it
// arrives, and a worker's pull of step t returns the current parameters once
// every worker has pushed step t - K (never waiting, for async) and its own
// push of step t is in them - no worker more than K steps ahead of the
// slowest (server/parameter_store.h states the rule). Their results depend on
// the order pushes arrive in, so they are not bit-reproducible.
//
// The shards' parameters start at zero (server/parameter_store.h), so they
// hold the displacement from the initial parameters, which every worker
// knows (the same seed): parameters = initial + served. SGD, momentum and
// Adam depend only on the gradients, never on the parameters themselves, so
// the displacement follows exactly the rule a server holding the parameters
// would apply.
//
// Compression. fp16: the tensor is declared with the FP16 push encoding
// (proto/parameter_server.proto), so PsClient pushes IEEE halves - half the
// bytes - and the shard widens each chunk to float32 as it arrives: its sums
// are those of the half-rounded gradients, the same numbers RoundThroughHalf
// gives. top-k: PsSync zeroes all but the k largest (error feedback keeps
// the rest for the next step) and declares the SPARSE push encoding, so
// PsClient pushes only the non-zeros as (index, value) pairs, 8 bytes each,
// and the shard scatters them into zeroed chunks: the same sums as the dense
// push, in 8k bytes instead of 4M (more than dense above k = M/2). Either
// way pulls stay float32 parameters: the shard serves parameters, not
// gradients, and keeps them at full precision.
//
// Buckets and overlap (bucket_pipeline.h), as over an all-reduce: with
// bucket_bytes the gradient is declared as one tensor per bucket
// ("<tensor>/bucket-<i>", each split over every shard) and each bucket is
// pushed and pulled on its own, last to first; with `overlap` a bucket's
// PushPull starts on a communication thread as soon as backpropagation has
// finished it (what BytePS does with its tensor partitions). Each bucket is
// a tensor with its own steps, so the stale modes bound every bucket, and
// with them the model, by the same k; top-k chooses per bucket, with error
// feedback per bucket.
//
// Thread-safety: one per worker; borrows the client, which must outlive it.
// With overlap the client is used by the pipeline's thread only.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "worker/ps_client.h"
#include "worker/train/bucket_pipeline.h"
#include "worker/train/compression.h"
#include "worker/train/gradient_sync.h"

namespace testbed {

// The parameter server's consistency for a training run.
struct PsMode {
  proto::TensorSpec::Consistency consistency = proto::TensorSpec::SYNCHRONOUS;
  std::uint32_t staleness = 0;  // K, for BOUNDED_STALENESS
  // "sync", "async" or "ssp:K": what ParsePsMode reads.
  std::string Name() const;
};
// Reads "sync", "async" or "ssp:K" (K a whole number of steps, 0 to 2^31);
// anything else is refused in one line that lists them.
absl::StatusOr<PsMode> ParsePsMode(std::string_view text);
// A spec's ps mode (proto/training.proto) as PsSync takes it; a staleness
// beyond ParsePsMode's bound, or one outside BOUNDED_STALENESS, is refused.
absl::StatusOr<PsMode> PsModeOf(const proto::PsMode& mode);
proto::PsMode ToProto(const PsMode& mode);

// How PsSync cuts and schedules the gradient (bucket_pipeline.h).
struct PsBuckets {
  std::size_t bytes = 0;  // 0: the whole gradient is one tensor
  bool overlap = false;   // push each bucket as soon as backpropagation finished it
};

class PsSync final : public GradientSync {
 public:
  // Declares the tensor `tensor` (every worker declares the same) of
  // initial.size() float32 elements for `workers` workers, or one tensor per
  // bucket.
  static absl::StatusOr<std::unique_ptr<PsSync>> Create(PsClient& client, std::string tensor,
                                                        std::uint32_t worker, int workers,
                                                        std::span<const float> initial,
                                                        const proto::Optimizer& optimizer,
                                                        CompressionConfig compression = {},
                                                        PsMode mode = {},
                                                        PsBuckets buckets = {});

  void BeginBackward(std::uint64_t step, std::span<float> gradient) override;
  void GradientReadyFrom(std::int64_t offset) override;
  absl::Status Step(std::uint64_t step, std::span<float> gradient,
                    std::span<float> parameters) override;
  std::uint64_t PayloadBytes() const override;
  double OverlappedSeconds() const override {
    return pipeline_->overlapped_seconds();
  }

 private:
  struct Bucket {
    BucketExtent extent;
    std::string tensor;                       // the bucket's tensor on the shards
    std::unique_ptr<ErrorFeedbackTopK> topk;  // top-k only, made at the first step
  };
  PsSync(PsClient& client, std::uint32_t worker, std::span<const float> initial,
         CompressionConfig compression)
      : client_(client),
        worker_(worker),
        initial_(initial.begin(), initial.end()),
        compression_(compression) {}

  // One bucket's push of `slice` (its part of this worker's gradient) and
  // the pull that overwrites it with what the shards serve.
  absl::Status PushPull(Bucket& bucket, std::uint64_t step, std::span<float> slice);
  // `slice` as the compressed scheme delivers it to the push, in place
  // (top-k; fp16 is the push encoding's).
  void Compress(Bucket& bucket, std::span<float> slice);

  PsClient& client_;
  const std::uint32_t worker_;
  const std::vector<float> initial_;  // what the served displacement is added to
  const CompressionConfig compression_;
  std::vector<Bucket> buckets_;  // by offset
  // Top-k's choice of one bucket (one bucket at a time, on whichever thread
  // runs it).
  std::vector<std::uint32_t> indices_;
  std::vector<float> values_;
  std::unique_ptr<BucketPipeline> pipeline_;
};

}  // namespace testbed
