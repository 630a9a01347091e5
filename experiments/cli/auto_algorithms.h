// `--algorithms auto` in `testbed local` and `run`: the CLI resolves "auto"
// before anything reaches the daemons. It fits every candidate all-reduce's
// alpha and beta - from results files of this cluster (--tuning), or from a
// short calibration run it submits first - then runs, per size, the one the
// model predicts fastest. Each such row says so in `chosen_by` (the choice and
// every candidate's predicted time), so "auto" compares with the fixed
// algorithms of the same run, row for row.
//
// Thread-safety: pure functions over values.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "allreduce/algorithm_choice.h"
#include "proto/experiment.pb.h"

namespace testbed {

// Whether the spec's algorithms name auto.
bool NamesAuto(const proto::ExperimentSpec& spec);

// What auto chooses among: the registry's all-reduces, ps only for sums.
std::vector<std::string> AutoCandidates(const proto::ExperimentSpec& spec);

// The calibration run: every candidate at CalibrationSizes of the spec's
// sizes (capped at 4 MiB), 10 timed iterations after 2 warm-ups, checked.
proto::ExperimentSpec CalibrationSpec(const proto::ExperimentSpec& spec);

// Each candidate's fitted constants, from the median times of rows of one
// transport per algorithm, and its measured times: the median times of its rows
// with the spec's workers, element type and (ps) shards, per size (rows of
// one size from several files: the median of theirs). A candidate without a
// fit is left out, with the reason on `log`; none left, or rows of one
// algorithm over several transports (two clusters mixed), is an error.
absl::StatusOr<std::vector<FittedAlgorithm>> FitCandidates(
    const std::vector<proto::ResultRow>& rows, const std::vector<std::string>& candidates,
    const proto::ExperimentSpec& spec, std::ostream& log);

// One submission of a resolved run, and what its rows say of their choice.
struct ResolvedSubmission {
  proto::ExperimentSpec spec;
  std::map<std::int64_t, std::string> chosen_by;  // per size; empty: named by the user
};

// The spec with auto resolved: first the algorithms the user named (if any),
// as one submission; then one per chosen algorithm, with the sizes it was
// chosen for, whose rows carry DescribeChoice(choice, source).
std::vector<ResolvedSubmission> ResolveAuto(const proto::ExperimentSpec& spec,
                                            const std::vector<AlgorithmChoice>& choices,
                                            std::string_view source);

}  // namespace testbed
