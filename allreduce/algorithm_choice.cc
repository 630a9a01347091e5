#include "allreduce/algorithm_choice.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "allreduce/collective.h"

namespace testbed {

absl::StatusOr<std::vector<AlgorithmChoice>> ChooseAlgorithms(
    const std::vector<FittedAlgorithm>& candidates, int workers, int servers,
    std::span<const std::int64_t> sizes, std::int64_t element_size) {
  if (candidates.empty()) return absl::InvalidArgumentError("auto has no algorithm to choose from");
  for (const FittedAlgorithm& candidate : candidates) {
    if (FindCollective(candidate.algorithm, Kinds::kAllReduce) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "auto chooses among all-reduces (", CollectiveNames(Kinds::kAllReduce), "), not '",
          candidate.algorithm, "'"));
    }
  }
  std::vector<AlgorithmChoice> choices;
  for (const std::int64_t bytes : sizes) {
    AlgorithmChoice choice;
    choice.bytes = bytes;
    for (const FittedAlgorithm& candidate : candidates) {
      absl::StatusOr<CostEstimate> estimate = EstimateAlgorithm(
          candidate.algorithm, workers, servers, bytes, element_size, candidate.link);
      if (!estimate.ok()) return estimate.status();
      choice.predictions.push_back({candidate.algorithm, estimate->time_s * 1e6});
    }
    // Stable: on a tie the candidate listed first stays first.
    std::stable_sort(choice.predictions.begin(), choice.predictions.end(),
                     [](const Prediction& a, const Prediction& b) { return a.time_us < b.time_us; });
    choice.algorithm = choice.predictions.front().algorithm;
    choices.push_back(std::move(choice));
  }
  return choices;
}

std::string DescribeChoice(const AlgorithmChoice& choice, std::string_view source) {
  std::string text;
  for (std::size_t i = 0; i < choice.predictions.size(); ++i) {
    const Prediction& p = choice.predictions[i];
    absl::StrAppend(&text, i == 0 ? "" : (i == 1 ? "; " : ", "), p.algorithm,
                    i == 0 ? ": predicted " : " ", absl::StrFormat("%.4g", p.time_us), " us");
  }
  absl::StrAppend(&text, " (", std::string(source), ")");
  return text;
}

std::vector<std::int64_t> CalibrationSizes(std::span<const std::int64_t> sizes,
                                           std::int64_t element_size, std::int64_t cap_bytes) {
  if (sizes.empty() || element_size <= 0) return {};
  const auto whole = [&](double bytes) {
    const auto elements = static_cast<std::int64_t>(bytes / static_cast<double>(element_size));
    return std::max<std::int64_t>(1, elements) * element_size;
  };
  const auto [min_it, max_it] = std::minmax_element(sizes.begin(), sizes.end());
  std::int64_t largest = whole(static_cast<double>(std::min(*max_it, cap_bytes)));
  std::int64_t smallest = std::min(whole(static_cast<double>(*min_it)), largest);
  if (smallest == largest) smallest = whole(static_cast<double>(largest) / 64);
  if (smallest == largest) largest = smallest * 64;  // one element: 1 and 64 elements
  std::set<std::int64_t> chosen = {
      smallest, largest,
      whole(std::sqrt(static_cast<double>(smallest) * static_cast<double>(largest)))};
  return {chosen.begin(), chosen.end()};
}

}  // namespace testbed
