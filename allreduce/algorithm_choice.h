// `--algorithms auto`: per message size, the all-reduce that the alpha-beta
// model of *this* cluster predicts fastest - NCCL's tuner, with the constants
// fitted to measurements instead of tabled. Each candidate brings its own
// fitted alpha and beta (`testbed fit` per algorithm): what an implementation
// pays per round and per byte differs between algorithms on the same links
// (ps goes through gRPC, the others through UCX), so one cluster-wide fit
// would predict every algorithm's constants wrong by the same token.
//
// One line per algorithm still cannot follow a transport that changes
// protocol with the size (UCX's eager sends give way to rendezvous at some
// KiB), so where a candidate was measured on both sides of a size, the model
// is the alpha-beta line through those two neighbouring measurements - their
// times interpolated in bytes - and at a measured size, the measurement. The
// line fitted to every size serves only outside what was measured.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "allreduce/cost_model.h"

namespace testbed {

// The word that asks for a choice in place of an algorithm's name.
inline constexpr std::string_view kAutoAlgorithm = "auto";

// A candidate's median time at one size, measured on this cluster with the
// workers, shards and element type being chosen for.
struct MeasuredTime {
  std::int64_t bytes = 0;
  double time_us = 0;
};

struct FittedAlgorithm {
  std::string algorithm;  // a registry entry with all-reduce semantics
  LinkModel link;         // its alpha and beta fitted to every size
  std::vector<MeasuredTime> measured;  // ascending bytes, one per size; may be empty
};

// What a predicted time rests on.
enum class PredictionBasis {
  kModel,         // the alpha-beta line fitted to every size
  kMeasured,      // a measurement at this very size
  kInterpolated,  // the line through the measurements at the sizes either side
};

struct Prediction {
  std::string algorithm;
  double time_us = 0;
  PredictionBasis basis = PredictionBasis::kModel;
};

struct AlgorithmChoice {
  std::int64_t bytes = 0;
  std::string algorithm;               // the fastest predicted
  std::vector<Prediction> predictions;  // every candidate's, fastest first
};

// Per size (in the order given), the candidate with the smallest predicted
// time for `workers` ranks and `servers` shards; a tie goes to the candidate
// listed first. Fails naming the problem when there is no candidate, one is
// not an all-reduce of the registry, or a size is not whole elements.
absl::StatusOr<std::vector<AlgorithmChoice>> ChooseAlgorithms(
    const std::vector<FittedAlgorithm>& candidates, int workers, int servers,
    std::span<const std::int64_t> sizes, std::int64_t element_size);

// A candidate's time at `bytes`: measured, interpolated or from its fitted
// line (see the top of this file).
absl::StatusOr<Prediction> Predict(const FittedAlgorithm& candidate, int workers, int servers,
                                   std::int64_t bytes, std::int64_t element_size);

// "ring: predicted 812 us; tree interpolated 905 us, butterfly measured 1020 us
// (<source>)": what a row chosen this way says of itself.
std::string DescribeChoice(const AlgorithmChoice& choice, std::string_view source);

// The sizes to measure each candidate at: the requested sizes up to
// `cap_bytes` (at most kMaxCalibrationSizes of them, spread evenly over the
// list, the smallest and largest kept), and the cap itself when a requested
// size lies beyond it; never fewer than two distinct sizes (with one size s,
// s / 64 is added), each a whole number of elements. Measuring the requested
// sizes themselves lets the choice there rest on measurements.
inline constexpr std::size_t kMaxCalibrationSizes = 8;
std::vector<std::int64_t> CalibrationSizes(std::span<const std::int64_t> sizes,
                                           std::int64_t element_size, std::int64_t cap_bytes);

}  // namespace testbed
