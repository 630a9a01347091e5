#include "worker/train/ps_sync.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "proto/training_spec.h"

namespace testbed {

std::string PsMode::Name() const { return PsModeText(ToProto(*this)); }

absl::StatusOr<PsMode> ParsePsMode(std::string_view text) {
  absl::StatusOr<proto::PsMode> mode = ParsePsModeText(text);
  if (!mode.ok()) return mode.status();
  return PsModeOf(*mode);
}

absl::StatusOr<PsMode> PsModeOf(const proto::PsMode& mode) {
  if (absl::Status st = CheckPsMode(mode); !st.ok()) return st;
  return PsMode{.consistency = mode.consistency(), .staleness = mode.staleness()};
}

proto::PsMode ToProto(const PsMode& mode) {
  proto::PsMode out;
  out.set_consistency(mode.consistency);
  out.set_staleness(mode.staleness);
  return out;
}

absl::StatusOr<std::unique_ptr<PsSync>> PsSync::Create(PsClient& client, std::string tensor,
                                                       std::uint32_t worker, int workers,
                                                       std::span<const float> initial,
                                                       const proto::Optimizer& optimizer,
                                                       CompressionConfig compression,
                                                       PsMode mode, PsBuckets buckets) {
  std::unique_ptr<PsSync> sync(new PsSync(client, worker, initial, compression));
  const std::vector<BucketExtent> extents =
      CutIntoBuckets(static_cast<std::int64_t>(initial.size()), buckets.bytes);
  for (std::size_t i = 0; i < extents.size(); ++i) {
    proto::TensorSpec spec;
    spec.set_name(extents.size() == 1 ? tensor : absl::StrCat(tensor, "/bucket-", i));
    spec.set_count(extents[i].elements);
    spec.set_dtype(proto::Dtype::float32);
    spec.set_workers(static_cast<std::uint32_t>(workers));
    *spec.mutable_optimizer() = optimizer;
    spec.mutable_optimizer()->set_average(true);
    spec.set_consistency(mode.consistency);
    spec.set_staleness(mode.staleness);
    if (compression.kind == CompressionConfig::Kind::kFp16) {
      spec.set_push_encoding(proto::TensorSpec::FP16);  // PsClient sends halves, the shard widens
    } else if (compression.kind == CompressionConfig::Kind::kTopK) {
      spec.set_push_encoding(proto::TensorSpec::SPARSE);  // the k non-zeros, as pairs
    }
    if (absl::Status s = client.Declare(spec); !s.ok()) return s;
    sync->buckets_.push_back({extents[i], spec.name(), nullptr});
  }
  sync->pipeline_ = std::make_unique<BucketPipeline>(
      extents,
      [s = sync.get()](std::size_t bucket, std::uint64_t step, std::span<float> slice) {
        return s->PushPull(s->buckets_[bucket], step, slice);
      },
      buckets.overlap ? BucketPipeline::Mode::kOverlapped : BucketPipeline::Mode::kAfterBackward);
  return sync;
}

void PsSync::Compress(Bucket& bucket, std::span<float> slice) {
  // fp16 needs nothing here: the tensor's push encoding rounds on the wire.
  if (compression_.kind != CompressionConfig::Kind::kTopK) return;
  if (bucket.topk == nullptr) {
    bucket.topk = std::make_unique<ErrorFeedbackTopK>(static_cast<std::int64_t>(slice.size()),
                                                      compression_.ratio);
  }
  indices_.resize(static_cast<std::size_t>(bucket.topk->k()));
  values_.resize(indices_.size());
  bucket.topk->Select(slice, indices_, values_);
  std::fill(slice.begin(), slice.end(), 0.0f);
  for (std::size_t j = 0; j < indices_.size(); ++j) slice[indices_[j]] = values_[j];
}

absl::Status PsSync::PushPull(Bucket& bucket, std::uint64_t step, std::span<float> slice) {
  ScaleForLearningRate(slice);
  Compress(bucket, slice);
  if (absl::Status s =
          client_.PushPull(bucket.tensor, worker_, step, std::as_writable_bytes(slice));
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("parameter server, step ", step, ": ", s.message()));
  }
  return absl::OkStatus();
}

void PsSync::BeginBackward(std::uint64_t step, std::span<float> gradient) {
  pipeline_->Begin(step, gradient);
}

void PsSync::GradientReadyFrom(std::int64_t offset) { pipeline_->ReadyFrom(offset); }

absl::Status PsSync::Step(std::uint64_t step, std::span<float> gradient,
                          std::span<float> parameters) {
  if (absl::Status s = pipeline_->Finish(step, gradient); !s.ok()) return s;
  for (std::size_t i = 0; i < parameters.size(); ++i) parameters[i] = initial_[i] + gradient[i];
  return absl::OkStatus();
}

std::uint64_t PsSync::PayloadBytes() const {
  std::uint64_t bytes = 0;
  for (const ShardTraffic& shard : client_.traffic()) bytes += shard.bytes_pushed + shard.bytes_pulled;
  return bytes;
}

}  // namespace testbed
