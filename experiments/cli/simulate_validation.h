// The simulator against measured runs (docs/simulator.md, "Validation"):
// every row of results files re-simulated under the spec it was measured
// with, alpha fitted per transport family to the points under 1 MiB, and
// the error point by point and per algorithm. `testbed simulate --against`
// prints it; tests/simulate_validation_test.cc holds the recorded points
// (experiments/reference/simulator_validation.jsonl) to bounds.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/results/result_row.h"

namespace testbed {

// Points smaller than this calibrate alpha; the rest only validate.
inline constexpr std::int64_t kCalibrationBytes = std::int64_t{1} << 20;

struct ValidationPoint {
  std::string algorithm;
  int workers = 0;
  std::int64_t bytes = 0;
  std::string fabric;
  std::string link;        // the host links' rate, "100mbit"
  double measured_us = 0;  // the row's median
  double simulated_us = 0;
  double error() const { return simulated_us / measured_us - 1; }
};

// Alpha per family: the schedules over UCX, and ps over gRPC.
struct Calibration {
  double schedules_alpha_us = 0;
  double ps_alpha_us = 0;
  int schedules_points = 0;  // the points each was fitted to (0: given, not fitted)
  int ps_points = 0;
};

struct AlgorithmError {
  std::string algorithm;  // or "all"
  std::string link;       // the link rate its points ran at; empty: every one
  int points = 0;
  int large = 0;  // points of kCalibrationBytes and more
  double large_geomean = 0;  // geometric mean of |error| over them
  int small = 0;
  double small_geomean = 0;
  double worst = 0;  // the largest |error|
};

struct Validation {
  Calibration calibration;
  std::vector<ValidationPoint> points;
  // Per link rate (in the order the points came), each algorithm in the
  // registry's order, then "all" of that rate.
  std::vector<AlgorithmError> by_algorithm;
  AlgorithmError all;  // every point ("all")
};

// Re-simulates every row of `runs` (rows with a median and a link rate; a
// run without one is an error naming it). `alpha_us` given: that alpha for
// both families; else each family's alpha is fitted to its points under
// kCalibrationBytes (least squares of log(simulated / measured)).
absl::StatusOr<Validation> ValidateSimulator(const std::vector<RecordedRun>& runs,
                                             std::optional<double> alpha_us,
                                             double host_ns_per_byte);

// The validation as Markdown: the calibration, per algorithm, then every point.
void PrintValidation(const Validation& validation, const std::string& source, std::ostream& out);

}  // namespace testbed
