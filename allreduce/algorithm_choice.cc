#include "allreduce/algorithm_choice.h"

#include <algorithm>
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
      absl::StatusOr<Prediction> prediction =
          Predict(candidate, workers, servers, bytes, element_size);
      if (!prediction.ok()) return prediction.status();
      choice.predictions.push_back(*std::move(prediction));
    }
    // Stable: on a tie the candidate listed first stays first.
    std::stable_sort(choice.predictions.begin(), choice.predictions.end(),
                     [](const Prediction& a, const Prediction& b) { return a.time_us < b.time_us; });
    choice.algorithm = choice.predictions.front().algorithm;
    choices.push_back(std::move(choice));
  }
  return choices;
}

absl::StatusOr<Prediction> Predict(const FittedAlgorithm& candidate, int workers, int servers,
                                   std::int64_t bytes, std::int64_t element_size) {
  // Estimated even where measured: it also refuses what the model cannot run.
  absl::StatusOr<CostEstimate> estimate =
      EstimateAlgorithm(candidate.algorithm, workers, servers, bytes, element_size, candidate.link);
  if (!estimate.ok()) return estimate.status();
  const std::vector<MeasuredTime>& measured = candidate.measured;
  const auto above =
      std::lower_bound(measured.begin(), measured.end(), bytes,
                       [](const MeasuredTime& m, std::int64_t b) { return m.bytes < b; });
  if (above != measured.end() && above->bytes == bytes) {
    return Prediction{candidate.algorithm, above->time_us, PredictionBasis::kMeasured};
  }
  if (above != measured.end() && above != measured.begin()) {
    const MeasuredTime& below = *(above - 1);
    const double share =
        static_cast<double>(bytes - below.bytes) / static_cast<double>(above->bytes - below.bytes);
    return Prediction{candidate.algorithm, below.time_us + share * (above->time_us - below.time_us),
                      PredictionBasis::kInterpolated};
  }
  return Prediction{candidate.algorithm, estimate->time_s * 1e6, PredictionBasis::kModel};
}

std::string DescribeChoice(const AlgorithmChoice& choice, std::string_view source) {
  const auto word = [](PredictionBasis basis) -> const char* {
    switch (basis) {
      case PredictionBasis::kMeasured:
        return "measured ";
      case PredictionBasis::kInterpolated:
        return "interpolated ";
      case PredictionBasis::kModel:
        break;
    }
    return "predicted ";
  };
  std::string text;
  for (std::size_t i = 0; i < choice.predictions.size(); ++i) {
    const Prediction& p = choice.predictions[i];
    if (i == 0) {
      absl::StrAppend(&text, p.algorithm, ": ", word(p.basis));
    } else {
      // The others name their basis only where it is not the fitted line.
      absl::StrAppend(&text, i == 1 ? "; " : ", ", p.algorithm, " ",
                      p.basis == PredictionBasis::kModel ? "" : word(p.basis));
    }
    absl::StrAppend(&text, absl::StrFormat("%.4g", p.time_us), " us");
  }
  absl::StrAppend(&text, " (", std::string(source), ")");
  return text;
}

std::vector<std::int64_t> CalibrationSizes(std::span<const std::int64_t> sizes,
                                           std::int64_t element_size, std::int64_t cap_bytes) {
  if (sizes.empty() || element_size <= 0) return {};
  const auto whole = [&](std::int64_t bytes) {
    return std::max<std::int64_t>(1, bytes / element_size) * element_size;
  };
  std::set<std::int64_t> within;
  bool beyond = false;
  for (const std::int64_t bytes : sizes) {
    if (bytes > cap_bytes) {
      beyond = true;
    } else {
      within.insert(whole(bytes));
    }
  }
  const std::vector<std::int64_t> requested(within.begin(), within.end());
  const std::size_t room = kMaxCalibrationSizes - (beyond ? 1 : 0);
  std::set<std::int64_t> chosen;
  if (requested.size() <= room) {
    chosen = within;
  } else {
    // Evenly over the sorted list, first and last included.
    for (std::size_t i = 0; i < room; ++i) {
      chosen.insert(requested[(i * (requested.size() - 1) + (room - 1) / 2) / (room - 1)]);
    }
  }
  if (beyond) chosen.insert(whole(cap_bytes));
  if (chosen.size() == 1) {
    const std::int64_t only = *chosen.begin();
    const std::int64_t smaller = whole(only / 64);
    chosen.insert(smaller != only ? smaller : only * 64);  // one element: 1 and 64 elements
  }
  return {chosen.begin(), chosen.end()};
}

}  // namespace testbed
