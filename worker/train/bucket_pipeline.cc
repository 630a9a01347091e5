#include "worker/train/bucket_pipeline.h"

#include <algorithm>

namespace testbed {

std::vector<BucketExtent> CutIntoBuckets(std::int64_t count, std::size_t bucket_bytes) {
  const std::int64_t per_bucket =
      bucket_bytes == 0 ? count
                        : std::max<std::int64_t>(1, static_cast<std::int64_t>(bucket_bytes / 4));
  std::vector<BucketExtent> buckets;
  for (std::int64_t offset = 0; offset < count; offset += per_bucket) {
    buckets.push_back({offset, std::min(per_bucket, count - offset)});
  }
  return buckets;
}

BucketPipeline::BucketPipeline(std::vector<BucketExtent> buckets, Work work, Mode mode)
    : buckets_(std::move(buckets)), work_(std::move(work)) {
  if (mode == Mode::kOverlapped) thread_ = std::thread([this] { Loop(); });
}

BucketPipeline::~BucketPipeline() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BucketPipeline::Begin(std::uint64_t step, std::span<float> gradient) {
  std::lock_guard<std::mutex> lock(mu_);
  step_ = step;
  gradient_ = gradient;
  ready_from_ = std::numeric_limits<std::int64_t>::max();
  buckets_done_ = 0;
  backward_end_.reset();
  step_overlapped_ = 0;
  status_ = absl::OkStatus();
  step_open_ = true;
}

void BucketPipeline::ReadyFrom(std::int64_t offset) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_from_ = std::min(ready_from_, offset);
  }
  changed_.notify_all();
}

bool BucketPipeline::NextBucketReady() const {
  return step_open_ && buckets_done_ < buckets_.size() &&
         ready_from_ <= buckets_[buckets_.size() - 1 - buckets_done_].offset;
}

void BucketPipeline::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    changed_.wait(lock, [this] { return stopping_ || NextBucketReady(); });
    if (stopping_) return;
    const std::size_t index = buckets_.size() - 1 - buckets_done_;
    const BucketExtent bucket = buckets_[index];
    const std::span<float> slice = gradient_.subspan(bucket.offset, bucket.elements);
    const std::uint64_t step = step_;
    const bool failed = !status_.ok();
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    absl::Status status = failed ? absl::OkStatus() : work_(index, step, slice);
    const auto end = std::chrono::steady_clock::now();
    lock.lock();
    // The part of this bucket's work before the backward pass ended.
    const auto hidden_until = backward_end_ ? std::min(end, *backward_end_) : end;
    if (hidden_until > start) {
      step_overlapped_ += std::chrono::duration<double>(hidden_until - start).count();
    }
    if (!status.ok() && status_.ok()) status_ = std::move(status);
    ++buckets_done_;
    changed_.notify_all();
  }
}

absl::Status BucketPipeline::RunInline(std::uint64_t step, std::span<float> gradient) {
  for (std::size_t i = buckets_.size(); i-- > 0;) {
    const std::span<float> slice = gradient.subspan(buckets_[i].offset, buckets_[i].elements);
    if (absl::Status s = work_(i, step, slice); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status BucketPipeline::Finish(std::uint64_t step, std::span<float> gradient) {
  if (!thread_.joinable()) return RunInline(step, gradient);
  bool open = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    open = step_open_ && step_ == step;
  }
  if (!open) Begin(step, gradient);  // nobody announced the backward pass
  std::unique_lock<std::mutex> lock(mu_);
  backward_end_ = std::chrono::steady_clock::now();
  ready_from_ = 0;  // whatever the model reported, the whole gradient is final now
  changed_.notify_all();
  changed_.wait(lock, [this] { return buckets_done_ == buckets_.size(); });
  step_open_ = false;
  overlapped_seconds_ = step_overlapped_;
  return status_;
}

}  // namespace testbed
