// Gradient buckets and the overlap of their synchronisation with the
// backward pass, for every GradientSync (DDP's buckets and its overlap,
// BytePS's per-partition pushes): the gradient is cut into buckets of about
// bucket_bytes, and a communication thread of the pipeline's own runs each
// bucket's work (an all-reduce, a push and pull) as soon as backpropagation
// has finished it - from the last bucket to the first, the order in which
// layers finish - while the layers below are still being computed. Finish()
// then waits only for what is left.
//
// Without overlap there is no thread: Finish runs every bucket's work on the
// caller's thread once the backward pass is over. The buckets always run in
// the same order (last to first), with or without overlap, so the executor's
// message tags match between ranks and a bucket's sum does not depend on
// timing.
//
// Thread-safety: Begin, ReadyFrom and Finish from the worker's thread; with
// overlap the work runs on the pipeline's thread only, one bucket at a time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace testbed {

struct BucketExtent {
  std::int64_t offset = 0;    // in floats
  std::int64_t elements = 0;  // floats
};

// `count` floats in buckets of bucket_bytes / 4 floats each (at least one;
// 0: one bucket), the last one shorter; none for count 0.
std::vector<BucketExtent> CutIntoBuckets(std::int64_t count, std::size_t bucket_bytes);

class BucketPipeline {
 public:
  // The work on bucket `bucket` (an index into the extents) of `step`, on
  // gradient[offset, offset + elements) in place. After a failure the rest
  // of the step's buckets are skipped: the failed link is unusable.
  using Work = std::function<absl::Status(std::size_t bucket, std::uint64_t step,
                                          std::span<float> gradient)>;

  enum class Mode {
    kOverlapped,     // a communication thread, bucket by bucket as they are ready
    kAfterBackward,  // on the caller's thread, in Finish
  };

  // With kOverlapped, starts the communication thread.
  BucketPipeline(std::vector<BucketExtent> buckets, Work work, Mode mode);
  ~BucketPipeline();
  BucketPipeline(const BucketPipeline&) = delete;
  BucketPipeline& operator=(const BucketPipeline&) = delete;

  // Backpropagation of `step` is about to write `gradient`, which must stay
  // valid until Finish returns.
  void Begin(std::uint64_t step, std::span<float> gradient);
  // gradient[offset, end) is final.
  void ReadyFrom(std::int64_t offset);
  // The backward pass is over: waits until every bucket of `step` is done
  // and returns the first failure. Without a Begin, the step begins here.
  absl::Status Finish(std::uint64_t step, std::span<float> gradient);

  // Of the last finished step's work, the seconds that ran while the
  // backward pass was still computing.
  double overlapped_seconds() const { return overlapped_seconds_; }
  const std::vector<BucketExtent>& buckets() const { return buckets_; }

 private:
  void Loop();
  bool NextBucketReady() const;  // mu_ held
  absl::Status RunInline(std::uint64_t step, std::span<float> gradient);

  const std::vector<BucketExtent> buckets_;
  const Work work_;
  double overlapped_seconds_ = 0;

  std::mutex mu_;
  std::condition_variable changed_;
  bool stopping_ = false;      // guarded by mu_
  bool step_open_ = false;     // guarded by mu_
  std::uint64_t step_ = 0;     // guarded by mu_
  std::span<float> gradient_;  // guarded by mu_
  std::int64_t ready_from_ = std::numeric_limits<std::int64_t>::max();  // guarded by mu_
  std::size_t buckets_done_ = 0;  // from the last one backwards; guarded by mu_
  std::optional<std::chrono::steady_clock::time_point> backward_end_;  // guarded by mu_
  double step_overlapped_ = 0;         // guarded by mu_
  absl::Status status_;                // the step's first failure; guarded by mu_
  std::thread thread_;  // kOverlapped only; last: started once the rest exists
};

}  // namespace testbed
