#include "worker/train/allreduce_sync.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace testbed {

absl::StatusOr<std::unique_ptr<AllReduceSync>> AllReduceSync::Create(
    const Collective& collective, Transport& transport, std::int64_t count,
    std::size_t bucket_bytes, const proto::Optimizer& optimizer, bool overlap) {
  if (!collective.has_schedule() || !collective.is_all_reduce()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", std::string(collective.name), "' is not a scheduled all-reduce (choose from ",
        CollectiveNames(Kinds::kScheduledAllReduce), ")"));
  }
  absl::StatusOr<std::unique_ptr<Optimizer>> rule = MakeOptimizer(optimizer);
  if (!rule.ok()) return rule.status();
  (*rule)->Prepare(count);
  std::unique_ptr<AllReduceSync> sync(new AllReduceSync(transport, *std::move(rule)));
  const std::int64_t per_bucket =
      bucket_bytes == 0 ? count
                        : std::max<std::int64_t>(1, static_cast<std::int64_t>(bucket_bytes / 4));
  for (std::int64_t offset = 0; offset < count; offset += per_bucket) {
    const std::int64_t elements = std::min(per_bucket, count - offset);
    Bucket bucket{.offset = offset,
                  .schedule = collective.build(transport.rank(), transport.world_size(), elements,
                                               /*root=*/0)};
    sync->executor_.Prepare(bucket.schedule, DataType::kFloat32);
    sync->buckets_.push_back(std::move(bucket));
  }
  if (overlap) sync->communication_ = std::thread([s = sync.get()] { s->CommunicationLoop(); });
  return sync;
}

AllReduceSync::~AllReduceSync() {
  if (!communication_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  communication_.join();
}

absl::Status AllReduceSync::AllReduce(const Bucket& bucket, std::span<float> gradient,
                                      std::uint64_t step) {
  std::span<std::byte> bytes = std::as_writable_bytes(gradient);
  MutableBuffer slice(
      bytes.subspan(bucket.offset * sizeof(float), bucket.schedule.count * sizeof(float)));
  absl::Status s = executor_.Run(bucket.schedule, slice, DataType::kFloat32, ReduceOp::kSum);
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("all-reduce of step ", step, ": ", s.message()));
}

void AllReduceSync::BeginBackward(std::uint64_t step, std::span<float> gradient) {
  if (!communication_.joinable()) return;
  std::lock_guard<std::mutex> lock(mu_);
  step_ = step;
  gradient_ = gradient;
  ready_from_ = std::numeric_limits<std::int64_t>::max();
  buckets_done_ = 0;
  backward_end_.reset();
  step_overlapped_ = 0;
  step_open_ = true;
}

void AllReduceSync::GradientReadyFrom(std::int64_t offset) {
  if (!communication_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_from_ = std::min(ready_from_, offset);
  }
  changed_.notify_all();
}

bool AllReduceSync::NextBucketReady() const {
  return step_open_ && buckets_done_ < buckets_.size() &&
         ready_from_ <= buckets_[buckets_.size() - 1 - buckets_done_].offset;
}

void AllReduceSync::CommunicationLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    changed_.wait(lock, [this] { return stopping_ || NextBucketReady(); });
    if (stopping_) return;
    const Bucket& bucket = buckets_[buckets_.size() - 1 - buckets_done_];
    const std::span<float> gradient = gradient_;
    const std::uint64_t step = step_;
    // After a failure the transport is unusable: the remaining buckets only
    // count as done.
    const bool failed = !communication_status_.ok();
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    absl::Status status = failed ? absl::OkStatus() : AllReduce(bucket, gradient, step);
    const auto end = std::chrono::steady_clock::now();
    lock.lock();
    // The part of this bucket's all-reduce before the backward pass ended.
    const auto hidden_until = backward_end_ ? std::min(end, *backward_end_) : end;
    if (hidden_until > start) {
      step_overlapped_ += std::chrono::duration<double>(hidden_until - start).count();
    }
    if (!status.ok() && communication_status_.ok()) communication_status_ = status;
    ++buckets_done_;
    changed_.notify_all();
  }
}

absl::Status AllReduceSync::FinishOverlappedStep(std::uint64_t step, std::span<float> gradient) {
  if (!step_open_) BeginBackward(step, gradient);  // nobody announced the backward pass
  std::unique_lock<std::mutex> lock(mu_);
  backward_end_ = std::chrono::steady_clock::now();
  ready_from_ = 0;  // whatever the model reported, the whole gradient is final now
  changed_.notify_all();
  changed_.wait(lock, [this] { return buckets_done_ == buckets_.size(); });
  step_open_ = false;
  overlapped_seconds_ = step_overlapped_;
  return communication_status_;
}

absl::Status AllReduceSync::Step(std::uint64_t step, std::span<float> gradient,
                                 std::span<float> parameters) {
  if (communication_.joinable()) {
    if (absl::Status s = FinishOverlappedStep(step, gradient); !s.ok()) return s;
  } else {
    for (const Bucket& bucket : buckets_) {
      if (absl::Status s = AllReduce(bucket, gradient, step); !s.ok()) return s;
    }
  }
  const float inverse_world = 1.0f / static_cast<float>(transport_.world_size());
  for (float& g : gradient) g *= inverse_world;
  optimizer_->BeginStep();
  optimizer_->Apply(0, gradient, parameters.data(), parameters.data());
  return absl::OkStatus();
}

std::uint64_t AllReduceSync::PayloadBytes() const {
  std::uint64_t bytes = 0;
  for (const PeerTraffic& peer : transport_.Traffic()) bytes += peer.bytes_sent + peer.bytes_received;
  return bytes;
}

}  // namespace testbed
