// Rules of a TrainingSpec, in one place for the coordinator (which admits a
// run and sizes it) and the workers (which train it): the defaults of the
// fields that say how large a run is, and what makes a spec many runs.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "proto/training.pb.h"

namespace testbed {

// The defaults proto/training.proto documents for a run's size and sync.
inline constexpr int kDefaultTrainingWorkers = 2;
inline constexpr int kDefaultTrainingServers = 1;
inline constexpr char kDefaultTrainingSync[] = "ring";

// Whether the spec has sweep axes (worker_counts, link_rates_bps, models,
// schemes): then it is many runs, which `testbed train` submits one by one.
bool HasSweepAxes(const proto::TrainingSpec& spec);

// Sets workers, servers and sync where they are unset, to the defaults above.
void ApplyRunDefaults(proto::TrainingSpec& spec);

// One run's workers 1..kMaxWorkers and servers 1..kMaxServers
// (common/limits.h), the limits `testbed train`'s flags hold too; anything
// else refused in one line naming the field, the value and the limit.
absl::Status CheckRunLimits(const proto::TrainingSpec& spec);

// The words of --compress and of the rows: "none", "fp16" or "topk:RATIO"
// with 0 < RATIO <= 1. Anything else is refused in one line naming the value
// and the choices. The one parser of that text: flags and old spec files
// (experiments/cli/spec_file.cc) both read it here.
absl::StatusOr<proto::Compression> ParseCompressionText(std::string_view text);
// A top-k ratio outside (0, 1] (a spec file can write one) is refused.
absl::Status CheckCompression(const proto::Compression& compression);
std::string CompressionText(const proto::Compression& compression);

// The words of --ps-mode and of the rows: "sync", "async" or "ssp:K" (K whole
// steps, 0 to 2^31).
absl::StatusOr<proto::PsMode> ParsePsModeText(std::string_view text);
// An unknown consistency, a staleness over 2^31, or one outside
// BOUNDED_STALENESS, is refused.
absl::Status CheckPsMode(const proto::PsMode& mode);
std::string PsModeText(const proto::PsMode& mode);

}  // namespace testbed
