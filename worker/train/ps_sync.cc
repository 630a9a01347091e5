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
                                                       PsMode mode) {
  proto::TensorSpec spec;
  spec.set_name(tensor);
  spec.set_count(static_cast<std::int64_t>(initial.size()));
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
  return std::unique_ptr<PsSync>(
      new PsSync(client, std::move(tensor), worker, initial, compression));
}

void PsSync::Compress(std::span<float> gradient) {
  // fp16 needs nothing here: the tensor's push encoding rounds on the wire.
  if (compression_.kind != CompressionConfig::Kind::kTopK) return;
  if (topk_ == nullptr) {
    topk_ = std::make_unique<ErrorFeedbackTopK>(static_cast<std::int64_t>(gradient.size()),
                                                compression_.ratio);
    indices_.resize(static_cast<std::size_t>(topk_->k()));
    values_.resize(indices_.size());
  }
  topk_->Select(gradient, indices_, values_);
  std::fill(gradient.begin(), gradient.end(), 0.0f);
  for (std::size_t j = 0; j < indices_.size(); ++j) gradient[indices_[j]] = values_[j];
}

absl::Status PsSync::Step(std::uint64_t step, std::span<float> gradient,
                          std::span<float> parameters) {
  ScaleForLearningRate(gradient);
  Compress(gradient);
  if (absl::Status s = client_.PushPull(tensor_, worker_, step, std::as_writable_bytes(gradient));
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("parameter server, step ", step, ": ", s.message()));
  }
  for (std::size_t i = 0; i < parameters.size(); ++i) parameters[i] = initial_[i] + gradient[i];
  return absl::OkStatus();
}

std::uint64_t PsSync::PayloadBytes() const {
  std::uint64_t bytes = 0;
  for (const ShardTraffic& shard : client_.traffic()) bytes += shard.bytes_pushed + shard.bytes_pulled;
  return bytes;
}

}  // namespace testbed
