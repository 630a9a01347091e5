#include "worker/train/allreduce_sync.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace testbed {

absl::StatusOr<std::unique_ptr<AllReduceSync>> AllReduceSync::Create(
    const Collective& collective, Transport& transport, std::int64_t count,
    std::size_t bucket_bytes, const proto::Optimizer& optimizer, bool overlap,
    CompressionConfig compression) {
  if (!collective.has_schedule() || !collective.is_all_reduce()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", std::string(collective.name), "' is not a scheduled all-reduce (choose from ",
        CollectiveNames(Kinds::kScheduledAllReduce), ")"));
  }
  absl::StatusOr<std::unique_ptr<Optimizer>> rule = MakeOptimizer(optimizer);
  if (!rule.ok()) return rule.status();
  (*rule)->Prepare(count);
  std::unique_ptr<AllReduceSync> sync(
      new AllReduceSync(transport, *std::move(rule), compression));
  std::size_t largest_chunk = 0;
  const std::vector<BucketExtent> extents = CutIntoBuckets(count, bucket_bytes);
  for (const BucketExtent& extent : extents) {
    sync->buckets_.push_back(sync->MakeBucket(collective, extent.offset, extent.elements));
    largest_chunk = std::max(largest_chunk, sync->buckets_.back().chunk_bytes);
  }
  sync->gathered_.resize(largest_chunk * static_cast<std::size_t>(transport.world_size()));
  sync->pipeline_ = std::make_unique<BucketPipeline>(
      extents,
      [s = sync.get()](std::size_t bucket, std::uint64_t step, std::span<float> slice) {
        return s->AllReduce(s->buckets_[bucket], slice, step);
      },
      overlap ? BucketPipeline::Mode::kOverlapped : BucketPipeline::Mode::kAfterBackward);
  return sync;
}

AllReduceSync::Bucket AllReduceSync::MakeBucket(const Collective& collective, std::int64_t offset,
                                                std::int64_t elements) {
  const int rank = transport_.rank(), world = transport_.world_size();
  Bucket bucket;
  bucket.offset = offset;
  bucket.elements = elements;
  if (compression_.kind != CompressionConfig::Kind::kTopK) {
    // The bucket's own all-reduce, of floats or of halves.
    bucket.schedule = collective.Build(rank, world, elements, /*root=*/0);
    executor_.Prepare(bucket.schedule, ElementType());
    return bucket;
  }
  bucket.topk = std::make_unique<ErrorFeedbackTopK>(elements, compression_.ratio);
  bucket.chunk_bytes = static_cast<std::size_t>(bucket.topk->k()) * 8;
  const std::int64_t words = static_cast<std::int64_t>(bucket.chunk_bytes / 4);
  bucket.schedule = FindCollective("all-gather")->Build(rank, world, words * world, /*root=*/0);
  executor_.Prepare(bucket.schedule, DataType::kInt32);
  return bucket;
}

AllReduceSync::~AllReduceSync() = default;

absl::Status AllReduceSync::AllReduce(Bucket& bucket, std::span<float> slice,
                                      std::uint64_t step) {
  absl::Status s;
  switch (compression_.kind) {
    case CompressionConfig::Kind::kNone:
      s = executor_.Run(bucket.schedule, MutableBuffer(std::as_writable_bytes(slice)),
                        DataType::kFloat32, ReduceOp::kSum);
      break;
    case CompressionConfig::Kind::kFp16: s = AllReduceHalves(bucket, slice); break;
    case CompressionConfig::Kind::kTopK: s = GatherTopK(bucket, slice); break;
  }
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("all-reduce of step ", step, ": ", s.message()));
}

absl::Status AllReduceSync::AllReduceHalves(const Bucket& bucket, std::span<float> slice) {
  halves_.resize(slice.size());
  ToHalf(slice, halves_);
  if (absl::Status s = executor_.Run(bucket.schedule,
                                     MutableBuffer(std::as_writable_bytes(std::span(halves_))),
                                     DataType::kFloat16, ReduceOp::kSum);
      !s.ok()) {
    return s;
  }
  FromHalf(halves_, slice);
  return absl::OkStatus();
}

absl::Status AllReduceSync::GatherTopK(Bucket& bucket, std::span<float> slice) {
  const auto world = static_cast<std::size_t>(transport_.world_size());
  const std::span<std::byte> all(gathered_.data(), bucket.chunk_bytes * world);
  const auto chunk = [&](std::size_t rank) {
    return all.subspan(rank * bucket.chunk_bytes, bucket.chunk_bytes);
  };
  Pack(bucket, slice, chunk(static_cast<std::size_t>(transport_.rank())));
  if (absl::Status s =
          executor_.Run(bucket.schedule, MutableBuffer(all), DataType::kInt32, ReduceOp::kSum);
      !s.ok()) {
    return s;
  }
  std::fill(slice.begin(), slice.end(), 0.0f);
  for (std::size_t rank = 0; rank < world; ++rank) AddUnpacked(bucket, chunk(rank), slice);
  return absl::OkStatus();
}

void AllReduceSync::Pack(Bucket& bucket, std::span<const float> slice,
                         std::span<std::byte> chunk) {
  const auto k = static_cast<std::size_t>(bucket.topk->k());
  indices_.resize(k);
  values_.resize(k);
  bucket.topk->Select(slice, indices_, values_);
  std::memcpy(chunk.data(), indices_.data(), 4 * k);
  std::memcpy(chunk.data() + 4 * k, values_.data(), 4 * k);
}

void AllReduceSync::AddUnpacked(const Bucket& bucket, std::span<const std::byte> chunk,
                                std::span<float> sum) {
  const auto k = static_cast<std::size_t>(bucket.topk->k());
  indices_.resize(k);
  values_.resize(k);
  std::memcpy(indices_.data(), chunk.data(), 4 * k);
  std::memcpy(values_.data(), chunk.data() + 4 * k, 4 * k);
  for (std::size_t j = 0; j < k; ++j) sum[indices_[j]] += values_[j];
}

void AllReduceSync::BeginBackward(std::uint64_t step, std::span<float> gradient) {
  pipeline_->Begin(step, gradient);
}

void AllReduceSync::GradientReadyFrom(std::int64_t offset) { pipeline_->ReadyFrom(offset); }

absl::Status AllReduceSync::Step(std::uint64_t step, std::span<float> gradient,
                                 std::span<float> parameters) {
  if (absl::Status s = pipeline_->Finish(step, gradient); !s.ok()) return s;
  // The mean, at the step's learning-rate factor (warmup) in the same pass.
  const float scale = learning_rate_factor() / static_cast<float>(transport_.world_size());
  for (float& g : gradient) g *= scale;
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
