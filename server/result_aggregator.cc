#include "server/result_aggregator.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "allreduce/collective.h"

namespace testbed {

absl::StatusOr<proto::ResultRow> AggregateRow(const proto::ExperimentSpec& spec,
                                              const std::vector<proto::RankResult>& by_rank) {
  const int n = static_cast<int>(spec.workers());
  if (static_cast<int>(by_rank.size()) != n || n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(by_rank.size(), " results for ", n, " ranks"));
  }
  const proto::RankResult& first = by_rank[0];
  const Collective* collective = FindCollective(first.algorithm());
  if (collective == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown algorithm ", first.algorithm()));
  }
  const int iterations = first.iteration_us_size();
  for (int r = 0; r < n; ++r) {
    const proto::RankResult& result = by_rank[r];
    if (static_cast<int>(result.rank()) != r || result.algorithm() != first.algorithm() ||
        result.bytes() != first.bytes() || result.iteration_us_size() != iterations) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", r, " reported ", result.algorithm(), "/", result.bytes(), " bytes/",
          result.iteration_us_size(), " iterations as rank ", result.rank(), "; rank 0 reported ",
          first.algorithm(), "/", first.bytes(), "/", iterations));
    }
  }

  proto::ResultRow row;
  row.set_algorithm(first.algorithm());
  row.set_workers(n);
  row.set_bytes(first.bytes());
  row.set_iterations(iterations);
  row.set_dtype(spec.dtype());
  row.set_transport(first.transport());

  double sum = 0, lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (int i = 0; i < iterations; ++i) {
    double slowest = 0;
    for (const proto::RankResult& result : by_rank) {
      slowest = std::max(slowest, result.iteration_us(i));
    }
    sum += slowest;
    lo = std::min(lo, slowest);
    hi = std::max(hi, slowest);
  }
  const double avg = iterations > 0 ? sum / iterations : 0;
  row.set_time_us_avg(avg);
  row.set_time_us_min(iterations > 0 ? lo : 0);
  row.set_time_us_max(hi);
  const double algbw = avg > 0 ? static_cast<double>(first.bytes()) / avg / 1e3 : 0;
  row.set_algbw_gbps(algbw);
  row.set_busbw_gbps(n > 1 ? algbw * 2.0 * (n - 1) / n : 0);

  std::uint64_t payload = 0, busiest = 0;
  std::int64_t wrong = 0;
  for (const proto::RankResult& result : by_rank) {
    payload += result.payload_bytes_sent();
    busiest = std::max({busiest, result.payload_bytes_sent(), result.payload_bytes_received()});
    wrong = (wrong < 0 || result.wrong() < 0) ? -1 : wrong + result.wrong();
  }
  row.set_payload_bytes_total(payload);
  row.set_max_rank_bytes(busiest);
  row.set_theory_bytes_total(collective->formula_bytes(n, first.bytes()));
  row.set_rounds(collective->formula_rounds(n));
  row.set_wrong(wrong);
  return row;
}

}  // namespace testbed
