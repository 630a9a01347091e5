// The alpha-beta cost model fitted to result rows, one fit per (algorithm,
// transport): what `testbed fit` prints and what `--algorithms auto` chooses
// by. Each row's two terms (rounds, bottleneck bytes) are read off the
// schedules for its N and M (ps: 2 rounds of N*M/S).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "allreduce/cost_model.h"
#include "proto/experiment.pb.h"

namespace testbed {

struct RowFit {
  std::string algorithm;
  std::string transport;  // as the rows name it; "" when they do not
  std::set<std::int64_t> sizes;
  std::set<std::int64_t> workers;
  // Fails when the group has fewer than two distinct sizes, or its terms
  // cannot be told apart.
  absl::StatusOr<AlphaBetaFit> fit;
};

// Which of a row's times the fit explains.
enum class FitTime {
  kAverage,  // time_us_avg: what `testbed fit` reports, comparable with nccl-tests
  kMedian,   // time_us_p50 (the average where a row has none): one slow iteration of
             // a short run cannot move it
};

// The time of `row` that `time` names.
double RowTimeUs(const proto::ResultRow& row, FitTime time);

// One fit per (algorithm, transport), in the order the rows first name them.
// A row the model cannot estimate (unknown algorithm or dtype) is skipped
// with a warning on `warnings`. Rows of the same algorithm, N, M, shards and
// dtype share one estimate. An interrupt (SIGINT, SIGTERM) ends it with
// CancelledError.
absl::StatusOr<std::vector<RowFit>> FitRows(const std::vector<proto::ResultRow>& rows,
                                            std::ostream& warnings,
                                            FitTime time = FitTime::kAverage);

}  // namespace testbed
