#include "worker/train/ps_sync.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace testbed {

absl::StatusOr<std::unique_ptr<PsSync>> PsSync::Create(PsClient& client, std::string tensor,
                                                       std::uint32_t worker, int workers,
                                                       std::span<const float> initial,
                                                       const proto::Optimizer& optimizer,
                                                       CompressionConfig compression) {
  proto::TensorSpec spec;
  spec.set_name(tensor);
  spec.set_count(static_cast<std::int64_t>(initial.size()));
  spec.set_dtype("float32");
  spec.set_workers(static_cast<std::uint32_t>(workers));
  *spec.mutable_optimizer() = optimizer;
  spec.mutable_optimizer()->set_average(true);
  if (absl::Status s = client.Declare(spec); !s.ok()) return s;
  return std::unique_ptr<PsSync>(
      new PsSync(client, std::move(tensor), worker, initial, compression));
}

void PsSync::Compress(std::span<float> gradient) {
  if (compression_.kind == CompressionConfig::Kind::kFp16) {
    RoundThroughHalf(gradient);
    return;
  }
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
