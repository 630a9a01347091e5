#include "worker/train/ps_sync.h"

#include <algorithm>
#include <charconv>

#include "absl/strings/str_cat.h"

namespace testbed {

std::string PsMode::Name() const {
  switch (consistency) {
    case proto::TensorSpec::ASYNCHRONOUS:
      return "async";
    case proto::TensorSpec::BOUNDED_STALENESS:
      return absl::StrCat("ssp:", staleness);
    default:
      return "sync";
  }
}

absl::StatusOr<PsMode> ParsePsMode(std::string_view text) {
  if (text == "sync") return PsMode{};
  if (text == "async") return PsMode{.consistency = proto::TensorSpec::ASYNCHRONOUS};
  if (text.starts_with("ssp:")) {
    const std::string_view bound = text.substr(4);
    std::uint32_t k = 0;
    const auto [end, error] = std::from_chars(bound.data(), bound.data() + bound.size(), k);
    if (!bound.empty() && error == std::errc() && end == bound.data() + bound.size() &&
        k <= (1u << 31)) {
      return PsMode{.consistency = proto::TensorSpec::BOUNDED_STALENESS, .staleness = k};
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ps mode '", std::string(text),
                   "' (choose from sync, async, ssp:K with K >= 0 steps of staleness)"));
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
    spec.set_dtype("float32");
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
