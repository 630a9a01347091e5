// `--algorithms auto`: per message size, the all-reduce that the alpha-beta
// model of *this* cluster predicts fastest - NCCL's tuner, with the constants
// fitted to measurements instead of tabled. Each candidate brings its own
// fitted alpha and beta (`testbed fit` per algorithm): what an implementation
// pays per round and per byte differs between algorithms on the same links
// (ps goes through gRPC, the others through UCX), so one cluster-wide fit
// would predict every algorithm's constants wrong by the same token.
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

struct FittedAlgorithm {
  std::string algorithm;  // a registry entry with all-reduce semantics
  LinkModel link;         // its fitted alpha and beta
};

struct Prediction {
  std::string algorithm;
  double time_us = 0;
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

// "ring: predicted 812 us; tree 905 us, butterfly 1020 us (<source>)": what a
// row chosen this way says of itself.
std::string DescribeChoice(const AlgorithmChoice& choice, std::string_view source);

// At most three sizes, spanning `sizes` up to `cap_bytes`, to fit each
// candidate's alpha and beta from: the smallest, the largest (at most the
// cap) and their geometric middle; never fewer than two distinct sizes (with
// one size s, s / 64 is added), each a whole number of elements.
std::vector<std::int64_t> CalibrationSizes(std::span<const std::int64_t> sizes,
                                           std::int64_t element_size, std::int64_t cap_bytes);

}  // namespace testbed
