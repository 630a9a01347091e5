#include "proto/training_spec.h"

#include <charconv>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/limits.h"

namespace testbed {
namespace {

constexpr std::string_view kTopKPrefix = "topk:";
constexpr std::uint32_t kMaxStaleness = 1u << 31;

absl::Status RefuseCompression(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "bad --compress '", std::string(text), "'", std::string(why),
      " (choose from none, fp16, topk:RATIO with 0 < RATIO <= 1)"));
}

}  // namespace

bool HasSweepAxes(const proto::TrainingSpec& spec) {
  return spec.worker_counts_size() > 0 || spec.link_rates_bps_size() > 0 || spec.models_size() > 0 ||
         spec.schemes_size() > 0;
}

void ApplyRunDefaults(proto::TrainingSpec& spec) {
  if (spec.workers() == 0) spec.set_workers(kDefaultTrainingWorkers);
  if (spec.servers() == 0) spec.set_servers(kDefaultTrainingServers);
  if (spec.sync().empty()) spec.set_sync(kDefaultTrainingSync);
}

absl::Status CheckRunLimits(const proto::TrainingSpec& spec) {
  if (spec.workers() < 1 || spec.workers() > static_cast<std::uint32_t>(kMaxWorkers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a training run's workers must be 1..", kMaxWorkers, ", not ", spec.workers()));
  }
  if (spec.servers() < 1 || spec.servers() > static_cast<std::uint32_t>(kMaxServers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a training run's servers must be 1..", kMaxServers, ", not ", spec.servers()));
  }
  return absl::OkStatus();
}

}  // namespace testbed

namespace testbed {

absl::StatusOr<proto::Compression> ParseCompressionText(std::string_view text) {
  proto::Compression compression;
  if (text == "none") return compression;
  if (text == "fp16") {
    compression.mutable_fp16();
    return compression;
  }
  if (!text.starts_with(kTopKPrefix)) return RefuseCompression(text, "");
  double ratio = 0;
  const std::string_view number = text.substr(kTopKPrefix.size());
  if (!absl::SimpleAtod(absl::string_view(number.data(), number.size()), &ratio)) {
    return RefuseCompression(text, ": RATIO is not a number");
  }
  compression.set_topk_ratio(ratio);
  if (absl::Status st = CheckCompression(compression); !st.ok()) return st;
  return compression;
}

absl::Status CheckCompression(const proto::Compression& compression) {
  if (compression.kind_case() != proto::Compression::kTopkRatio) return absl::OkStatus();
  const double ratio = compression.topk_ratio();
  if (ratio > 0 && ratio <= 1) return absl::OkStatus();
  return RefuseCompression(CompressionText(compression), ": RATIO is out of range");
}

std::string CompressionText(const proto::Compression& compression) {
  switch (compression.kind_case()) {
    case proto::Compression::kFp16: return "fp16";
    case proto::Compression::kTopkRatio:
      return absl::StrFormat("topk:%g", compression.topk_ratio());
    case proto::Compression::KIND_NOT_SET: break;
  }
  return "none";
}

absl::StatusOr<proto::PsMode> ParsePsModeText(std::string_view text) {
  proto::PsMode mode;
  if (text == "sync") return mode;
  if (text == "async") {
    mode.set_consistency(proto::TensorSpec::ASYNCHRONOUS);
    return mode;
  }
  if (text.starts_with("ssp:")) {
    const std::string_view bound = text.substr(4);
    std::uint32_t k = 0;
    const auto [end, error] = std::from_chars(bound.data(), bound.data() + bound.size(), k);
    if (!bound.empty() && error == std::errc() && end == bound.data() + bound.size() &&
        k <= kMaxStaleness) {
      mode.set_consistency(proto::TensorSpec::BOUNDED_STALENESS);
      mode.set_staleness(k);
      return mode;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ps mode '", std::string(text),
                   "' (choose from sync, async, ssp:K with K >= 0 steps of staleness)"));
}

absl::Status CheckPsMode(const proto::PsMode& mode) {
  if (!proto::TensorSpec::Consistency_IsValid(mode.consistency())) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown ps_mode consistency ", static_cast<int>(mode.consistency())));
  }
  if (mode.staleness() != 0 && mode.consistency() != proto::TensorSpec::BOUNDED_STALENESS) {
    return absl::InvalidArgumentError(
        absl::StrCat("ps_mode staleness ", mode.staleness(), " needs BOUNDED_STALENESS"));
  }
  if (mode.staleness() > kMaxStaleness) {
    return absl::InvalidArgumentError(
        absl::StrCat("ps_mode staleness ", mode.staleness(), " is over 2^31 steps"));
  }
  return absl::OkStatus();
}

std::string PsModeText(const proto::PsMode& mode) {
  switch (mode.consistency()) {
    case proto::TensorSpec::ASYNCHRONOUS: return "async";
    case proto::TensorSpec::BOUNDED_STALENESS: return absl::StrCat("ssp:", mode.staleness());
    default: return "sync";
  }
}

}  // namespace testbed
