#include "worker/train/compression.h"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>

#include "proto/training_spec.h"

namespace testbed {

std::string CompressionConfig::Name() const { return CompressionText(ToProto(*this)); }

absl::StatusOr<CompressionConfig> ParseCompression(std::string_view text) {
  absl::StatusOr<proto::Compression> compression = ParseCompressionText(text);
  if (!compression.ok()) return compression.status();
  return CompressionOf(*compression);
}

absl::StatusOr<CompressionConfig> CompressionOf(const proto::Compression& compression) {
  if (absl::Status st = CheckCompression(compression); !st.ok()) return st;
  CompressionConfig config;
  if (compression.has_fp16()) config.kind = CompressionConfig::Kind::kFp16;
  if (compression.kind_case() == proto::Compression::kTopkRatio) {
    config.kind = CompressionConfig::Kind::kTopK;
    config.ratio = compression.topk_ratio();
  }
  return config;
}

proto::Compression ToProto(const CompressionConfig& config) {
  proto::Compression compression;
  if (config.kind == CompressionConfig::Kind::kFp16) compression.mutable_fp16();
  if (config.kind == CompressionConfig::Kind::kTopK) compression.set_topk_ratio(config.ratio);
  return compression;
}

void ToHalf(std::span<const float> values, std::span<std::uint16_t> out) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    out[i] = Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(values[i]));
  }
}

void FromHalf(std::span<const std::uint16_t> halves, std::span<float> out) {
  for (std::size_t i = 0; i < halves.size(); ++i) {
    out[i] = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(halves[i]));
  }
}

void RoundThroughHalf(std::span<float> values) {
  for (float& value : values) value = static_cast<float>(Eigen::half(value));
}

std::int64_t TopKCount(std::int64_t elements, double ratio) {
  if (elements <= 0) return 0;
  const auto k = static_cast<std::int64_t>(std::ceil(ratio * static_cast<double>(elements)));
  return std::clamp<std::int64_t>(k, 1, elements);
}

ErrorFeedbackTopK::ErrorFeedbackTopK(std::int64_t elements, double ratio)
    : k_(TopKCount(elements, ratio)), residual_(elements, 0.0f), order_(elements) {}

void ErrorFeedbackTopK::Select(std::span<const float> gradient, std::span<std::uint32_t> indices,
                               std::span<float> values) {
  for (std::size_t i = 0; i < residual_.size(); ++i) residual_[i] += gradient[i];
  for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<std::uint32_t>(i);
  // Largest magnitude first; equal magnitudes by index, so every run (and
  // every worker given the same numbers) picks the same elements.
  const auto larger = [this](std::uint32_t a, std::uint32_t b) {
    const float fa = std::abs(residual_[a]), fb = std::abs(residual_[b]);
    return fa > fb || (fa == fb && a < b);
  };
  std::nth_element(order_.begin(), order_.begin() + k_, order_.end(), larger);
  std::sort(order_.begin(), order_.begin() + k_);
  for (std::int64_t j = 0; j < k_; ++j) {
    const std::uint32_t index = order_[j];
    indices[j] = index;
    values[j] = residual_[index];
    residual_[index] = 0.0f;  // sent whole: nothing of it is kept
  }
}

}  // namespace testbed
