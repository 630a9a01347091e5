#include "worker/train/compression.h"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace testbed {
namespace {

constexpr std::string_view kTopKPrefix = "topk:";

absl::Status Refuse(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("bad --compress '", std::string(text), "'",
                                                  std::string(why),
                                                  " (choose from none, fp16, topk:RATIO with "
                                                  "0 < RATIO <= 1)"));
}

}  // namespace

std::string CompressionConfig::Name() const {
  switch (kind) {
    case Kind::kNone: return "none";
    case Kind::kFp16: return "fp16";
    case Kind::kTopK: return absl::StrFormat("topk:%g", ratio);
  }
  return "";
}

absl::StatusOr<CompressionConfig> ParseCompression(std::string_view text) {
  CompressionConfig config;
  if (text == "none") return config;
  if (text == "fp16") {
    config.kind = CompressionConfig::Kind::kFp16;
    return config;
  }
  if (!text.starts_with(kTopKPrefix)) return Refuse(text, "");
  double ratio = 0;
  const std::string_view number = text.substr(kTopKPrefix.size());
  if (!absl::SimpleAtod(absl::string_view(number.data(), number.size()), &ratio)) {
    return Refuse(text, ": RATIO is not a number");
  }
  if (!(ratio > 0 && ratio <= 1)) return Refuse(text, ": RATIO is out of range");
  config.kind = CompressionConfig::Kind::kTopK;
  config.ratio = ratio;
  return config;
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
