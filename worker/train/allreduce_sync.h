// GradientSync through an all-reduce of the registry, run by the Executor
// over a Transport (UCX between processes or threads, in-process in tests).
// The gradient is cut into buckets of about `bucket_bytes` (DDP's gradient
// buckets; 0: one bucket), each all-reduced in order with its own schedule,
// then divided by N; the optimizer then updates the parameters locally.
//
// With `overlap`, a BucketPipeline (bucket_pipeline.h) all-reduces each
// bucket on a communication thread as soon as backpropagation has finished
// it, while the layers below are still being computed (DDP's overlap);
// Step() then waits only for what is left. Every rank runs the buckets in
// the same order (last to first, with or without overlap), so the
// executor's message tags still match, and the sums are the same.
//
// Compression (compression.h):
//   fp16  each rank packs its bucket into halves and the bucket's own
//         all-reduce (ring, tree, butterfly, ...) runs on them as
//         DataType::kFloat16 with kSum: every hop widens to float, adds and
//         rounds back to half (data_type.h), as NCCL does; the result is
//         widened back to float32. The payload is the collective's closed
//         form for M = 2 bytes an element, half of float32's.
//   topk  the registry's all-gather of every rank's k (index, value) pairs,
//         8 bytes each, with error feedback per bucket, which each rank then
//         sums in float32, in rank order (so every rank holds the same sum):
//         (N-1)·8k bytes in and out per rank.
//
// Thread-safety: one per worker, called from that worker's thread; with
// overlap the transport is used by the communication thread only. Borrows
// the transport, which must outlive it.
#pragma once

#include <memory>
#include <vector>

#include "allreduce/collective.h"
#include "allreduce/data_type.h"
#include "allreduce/executor.h"
#include "allreduce/schedule.h"
#include "allreduce/transport/transport.h"
#include "common/optimizer.h"
#include "worker/train/bucket_pipeline.h"
#include "worker/train/compression.h"
#include "worker/train/gradient_sync.h"

namespace testbed {

class AllReduceSync final : public GradientSync {
 public:
  // `collective` must be a scheduled all-reduce; `count` is the number of
  // parameters.
  static absl::StatusOr<std::unique_ptr<AllReduceSync>> Create(const Collective& collective,
                                                                Transport& transport,
                                                                std::int64_t count,
                                                                std::size_t bucket_bytes,
                                                                const proto::Optimizer& optimizer,
                                                                bool overlap = false,
                                                                CompressionConfig compression = {});
  ~AllReduceSync() override;

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
    std::int64_t offset = 0;    // in floats
    std::int64_t elements = 0;  // floats
    // Uncompressed and fp16: the all-reduce of the bucket's elements (floats
    // or halves). Top-k: the all-gather of N chunks of chunk_bytes / 4 int32
    // elements each.
    Schedule schedule;
    std::size_t chunk_bytes = 0;              // top-k: one rank's pairs
    std::unique_ptr<ErrorFeedbackTopK> topk;  // top-k only
  };
  AllReduceSync(Transport& transport, std::unique_ptr<Optimizer> optimizer,
                CompressionConfig compression)
      : transport_(transport),
        executor_(transport),
        optimizer_(std::move(optimizer)),
        compression_(compression) {}

  // What the buckets' all-reduces carry: halves with fp16, floats otherwise.
  DataType ElementType() const {
    return compression_.kind == CompressionConfig::Kind::kFp16 ? DataType::kFloat16
                                                               : DataType::kFloat32;
  }
  // The bucket at `offset` of `elements` floats, its schedule prepared.
  Bucket MakeBucket(const Collective& collective, std::int64_t offset, std::int64_t elements);
  // The all-reduce of one bucket, `slice` its part of the gradient.
  absl::Status AllReduce(Bucket& bucket, std::span<float> slice, std::uint64_t step);
  // fp16: `slice` to halves, their all-reduce, the sum back to floats.
  absl::Status AllReduceHalves(const Bucket& bucket, std::span<float> slice);
  // Top-k: all-gather every rank's pairs, then the sum.
  absl::Status GatherTopK(Bucket& bucket, std::span<float> slice);
  // This rank's top-k of `slice` into `chunk`; a rank's `chunk` added to `sum`.
  void Pack(Bucket& bucket, std::span<const float> slice, std::span<std::byte> chunk);
  void AddUnpacked(const Bucket& bucket, std::span<const std::byte> chunk, std::span<float> sum);

  Transport& transport_;
  Executor executor_;
  std::unique_ptr<Optimizer> optimizer_;
  const CompressionConfig compression_;
  std::vector<Bucket> buckets_;  // by offset
  // Compressed exchanges (one bucket at a time, on whichever thread runs
  // them): fp16's halves; top-k's chunks of every rank, and one unpacked.
  std::vector<std::uint16_t> halves_;
  std::vector<std::byte> gathered_;
  std::vector<std::uint32_t> indices_;
  std::vector<float> values_;
  // Overlap only; with it the transport is used by the pipeline's thread.
  std::unique_ptr<BucketPipeline> pipeline_;
};

}  // namespace testbed
