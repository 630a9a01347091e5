#include "experiments/results/row_fits.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "experiments/results/result_row.h"

namespace testbed {

double RowTimeUs(const proto::ResultRow& row, FitTime time) {
  return time == FitTime::kMedian && row.time_us_p50() > 0 ? row.time_us_p50() : row.time_us_avg();
}

std::vector<RowFit> FitRows(const std::vector<proto::ResultRow>& rows, std::ostream& warnings,
                            FitTime time) {
  std::map<std::pair<std::string, std::string>, std::size_t> index;  // into `fits`
  std::vector<RowFit> fits;
  std::vector<std::vector<FitPoint>> points;
  for (const proto::ResultRow& row : rows) {
    const absl::StatusOr<CostEstimate> e = EstimateRow(row, LinkModel{});
    if (!e.ok()) {
      warnings << "warning: skipping a row of " << row.algorithm() << ": "
               << e.status().message() << "\n";
      continue;
    }
    const auto key = std::make_pair(row.algorithm(), row.transport());
    auto [at, added] = index.try_emplace(key, fits.size());
    if (added) {
      fits.push_back(RowFit{row.algorithm(), row.transport(), {}, {}, absl::UnknownError("")});
      points.emplace_back();
    }
    RowFit& group = fits[at->second];
    points[at->second].push_back(
        FitPoint{e->rounds, e->bottleneck_bytes, RowTimeUs(row, time) * 1e-6});
    group.sizes.insert(row.bytes());
    group.workers.insert(row.workers());
  }
  for (std::size_t i = 0; i < fits.size(); ++i) {
    fits[i].fit = fits[i].sizes.size() < 2
                      ? absl::InvalidArgumentError(absl::StrCat(
                            "needs at least 2 distinct sizes to fit alpha and beta, has ",
                            fits[i].sizes.size()))
                      : FitAlphaBeta(points[i]);
  }
  return fits;
}

}  // namespace testbed
