#include "experiments/results/row_fits.h"

#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "experiments/results/result_row.h"

namespace testbed {

double RowTimeUs(const proto::ResultRow& row, FitTime time) {
  return time == FitTime::kMedian && row.time_us_p50() > 0 ? row.time_us_p50() : row.time_us_avg();
}

absl::StatusOr<std::vector<RowFit>> FitRows(const std::vector<proto::ResultRow>& rows,
                                            std::ostream& warnings, FitTime time) {
  std::map<std::pair<std::string, std::string>, std::size_t> index;  // into `fits`
  std::vector<RowFit> fits;
  std::vector<std::vector<FitPoint>> points;
  // A results file repeats its configurations (runs, iterations of a sweep):
  // each is estimated once.
  using Configuration = std::tuple<std::string, std::uint32_t, std::int64_t, std::uint32_t,
                                   std::string>;
  std::map<Configuration, absl::StatusOr<CostEstimate>> estimates;
  for (const proto::ResultRow& row : rows) {
    const Configuration configuration{row.algorithm(), row.workers(), row.bytes(),
                                      row.servers(), row.dtype()};
    auto cached = estimates.find(configuration);
    if (cached == estimates.end()) {
      cached = estimates.emplace(configuration, EstimateRow(row, LinkModel{})).first;
    }
    const absl::StatusOr<CostEstimate>& e = cached->second;
    if (absl::IsCancelled(e.status())) return e.status();
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
