#include "experiments/results/course_table.h"

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <fstream>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "allreduce/collective.h"
#include "allreduce/cost_model.h"
#include "allreduce/data_type.h"
#include "common/byte_size.h"
#include "experiments/results/result_row.h"

namespace testbed {
namespace {

// 100663296 -> "96.0 MiB": one decimal, so a table's column reads at a glance.
std::string HumanBytes(double bytes) {
  const ScaledBytes scaled = ToBinaryUnit(bytes);
  char text[32];
  std::snprintf(text, sizeof text, scaled.unit[0] == 'B' ? "%.0f %s" : "%.1f %s", scaled.value,
                scaled.unit);
  return text;
}

std::string Microseconds(double us) {
  char text[32];
  if (us >= 1e6) {
    std::snprintf(text, sizeof text, "%.2f s", us / 1e6);
  } else if (us >= 1e3) {
    std::snprintf(text, sizeof text, "%.1f ms", us / 1e3);
  } else {
    std::snprintf(text, sizeof text, "%.0f µs", us);
  }
  return text;
}

std::string Ratio(double measured, double predicted) {
  if (predicted <= 0) return "";
  char text[32];
  std::snprintf(text, sizeof text, " (%.2f×)", measured / predicted);
  return text;
}

// The registry's order; unknown algorithms last.
int OrderOf(const std::string& algorithm) {
  const std::vector<Collective>& all = AllCollectives();
  const Collective* c = FindCollective(algorithm);
  return c == nullptr ? static_cast<int>(all.size()) : static_cast<int>(c - all.data());
}

bool RunsOnParameterServer(const std::string& algorithm) {
  const Collective* c = FindCollective(algorithm);
  return c != nullptr && c->runs_on_parameter_server();
}

// Rows whose ranks' own medians lie more than 10% apart: the slowest rank and
// how far behind the fastest it was (a slow link, or a rank the others wait on).
void PrintRanksApart(const std::vector<proto::ResultRow>& rows, std::ostream& out) {
  bool header = false;
  for (const proto::ResultRow& row : rows) {
    const auto& medians = row.rank_time_us_p50();
    if (medians.size() < 2) continue;
    const auto slowest = std::max_element(medians.begin(), medians.end());
    const auto fastest = std::min_element(medians.begin(), medians.end());
    if (*fastest == 0 || static_cast<double>(*slowest) < 1.1 * static_cast<double>(*fastest)) {
      continue;
    }
    if (!header) {
      out << "\n## Ranks apart\n\n"
          << "Rows whose ranks' own median times differ by more than 10%. The slowest rank "
             "waited longest: on a slow link, or for a rank that began late. A rank that began "
             "late (a compute straggler, the fabric's slow_ranks) is the fastest: it found the "
             "others waiting.\n\n"
          << "| N | M | algorithm | fabric | slowest rank | its median | fastest rank | its median "
             "| behind |\n"
          << "|---:|---:|---|---|---:|---:|---:|---:|---:|\n";
      header = true;
    }
    char behind[16];
    std::snprintf(behind, sizeof behind, "%.2f×",
                  static_cast<double>(*slowest) / static_cast<double>(*fastest));
    out << "| " << row.workers() << " | " << HumanBytes(static_cast<double>(row.bytes())) << " | "
        << row.algorithm() << " | " << (row.fabric().empty() ? "flat" : row.fabric()) << " | "
        << (slowest - medians.begin()) << " | " << Microseconds(static_cast<double>(*slowest))
        << " | " << (fastest - medians.begin()) << " | "
        << Microseconds(static_cast<double>(*fastest)) << " | " << behind << " |\n";
  }
}

}  // namespace

std::string BottleneckDescription(const std::string& algorithm) {
  const Collective* c = FindCollective(algorithm);
  return c == nullptr ? "" : std::string(c->bottleneck);
}

absl::Status PrintCourseTable(const std::vector<proto::ResultRow>& all_rows, std::ostream& out) {
  // The latest measurement of each (N, M, algorithm, transport), in order.
  using Key = std::tuple<int, std::int64_t, int, std::string, std::string>;
  std::map<Key, proto::ResultRow> rows;
  for (const proto::ResultRow& row : all_rows) {
    rows[{static_cast<int>(row.workers()), row.bytes(), OrderOf(row.algorithm()), row.algorithm(),
          row.transport()}] = row;
  }
  if (rows.empty()) return absl::NotFoundError("no result records");

  // Each row's rounds and busiest-link bytes (none for an unknown algorithm),
  // and the model fitted per (algorithm, transport) over every N and M.
  std::map<Key, CostEstimate> estimates;
  std::map<std::pair<std::string, std::string>, std::vector<FitPoint>> points;
  for (const auto& [key, row] : rows) {
    const absl::StatusOr<CostEstimate> e = EstimateRow(row, LinkModel{});
    if (e.ok()) {
      estimates[key] = *e;
      points[{row.algorithm(), row.transport()}].push_back(
          FitPoint{e->rounds, e->bottleneck_bytes, row.time_us_avg() * 1e-6});
    }
  }
  std::map<std::pair<std::string, std::string>, AlphaBetaFit> fits;
  for (const auto& [group, group_points] : points) {
    if (auto fit = FitAlphaBeta(group_points); fit.ok()) fits[group] = *fit;
  }

  out << "# Traffic and time per algorithm\n\n"
      << "Traffic: payload bytes all ranks sent in one collective, measured / the closed form. "
         "Wire: what the workers' own interfaces carried for it - sent, and for ps sent and "
         "received (headers and acknowledgements included; only where each rank has its own "
         "interface). Time per collective, the slowest "
         "rank's: measured, then the alpha-beta model with the run's link rate "
         "(`model_time_us`) and the same model fitted to this file (`testbed fit`); "
         "in brackets measured / predicted.\n";
  std::pair<int, std::int64_t> section{-1, -1};
  for (const auto& [key, row] : rows) {
    if (section != std::pair{static_cast<int>(row.workers()), row.bytes()}) {
      section = {static_cast<int>(row.workers()), row.bytes()};
      out << "\n## N = " << row.workers() << ", M = " << FormatByteSize(row.bytes()) << "\n\n"
          << "| algorithm | transport | traffic (measured / formula) | wire | rounds | time "
             "measured | predicted (link) | predicted (fitted) | bottleneck link |\n"
          << "|---|---|---|---|---:|---:|---:|---:|---|\n";
    }
    const auto found = estimates.find(key);
    const CostEstimate* e = found == estimates.end() ? nullptr : &found->second;
    std::string traffic = HumanBytes(static_cast<double>(row.payload_bytes_total()));
    if (row.theory_bytes_total() > 0) {
      absl::StrAppend(&traffic, " / ", HumanBytes(static_cast<double>(row.theory_bytes_total())));
    }
    // The wire bytes that carried the payload: an all-reduce's leave one
    // worker for another; ps pushes leave the workers and pulls arrive there.
    double wire_bytes = static_cast<double>(row.wire_bytes_sent_total());
    if (RunsOnParameterServer(row.algorithm())) {
      wire_bytes += static_cast<double>(row.wire_bytes_received_total());
    }
    const std::string wire = wire_bytes > 0 ? HumanBytes(wire_bytes) : "–";
    const int rounds = row.rounds() > 0 ? static_cast<int>(row.rounds()) : (e ? e->rounds : 0);
    std::string linked = "–", fitted = "–";
    if (row.has_model_time_us() && row.model_time_us() > 0) {
      linked = Microseconds(row.model_time_us()) + Ratio(row.time_us_avg(), row.model_time_us());
    }
    if (auto fit = fits.find({row.algorithm(), row.transport()}); fit != fits.end() && e) {
      const double predicted_us =
          ModelTime(fit->second.link, e->rounds, e->bottleneck_bytes) * 1e6;
      fitted = Microseconds(predicted_us) + Ratio(row.time_us_avg(), predicted_us);
    }
    std::string bottleneck = BottleneckDescription(row.algorithm());
    if (e) absl::StrAppend(&bottleneck, " = ", HumanBytes(e->bottleneck_bytes));
    if (RunsOnParameterServer(row.algorithm())) {
      absl::StrAppend(&bottleneck, " (S = ", row.servers(), ")");
    }
    out << "| " << row.algorithm() << " | " << (row.transport().empty() ? "–" : row.transport())
        << " | " << traffic << " | " << wire << " | " << rounds << " | "
        << Microseconds(row.time_us_avg()) << " | " << linked << " | " << fitted << " | "
        << bottleneck << " |\n";
  }
  if (!fits.empty()) {
    out << "\n## The fitted model\n\n"
        << "time = alpha · rounds + beta · (the busiest link's bytes, summed over rounds)\n\n"
        << "| algorithm | transport | points | alpha | link rate 8/beta | R² | worst residual |\n"
        << "|---|---|---:|---:|---:|---:|---:|\n";
    for (const auto& [group, fit] : fits) {
      char rate[32] = "–";
      if (fit.link.beta_s_per_byte > 0) {
        std::snprintf(rate, sizeof rate, "%.3f Gbit/s", 8.0 / fit.link.beta_s_per_byte / 1e9);
      }
      char r2[16], worst[16];
      std::snprintf(r2, sizeof r2, "%.4f", fit.r_squared);
      std::snprintf(worst, sizeof worst, "%.0f%%", fit.worst_relative_residual * 100);
      out << "| " << group.first << " | " << (group.second.empty() ? "–" : group.second) << " | "
          << fit.points << " | " << Microseconds(fit.link.alpha_s * 1e6) << " | " << rate << " | "
          << r2 << " | " << worst << " |\n";
    }
  }
  PrintRanksApart(all_rows, out);
  return absl::OkStatus();
}

std::string CourseTablePathFor(const std::string& results_path) {
  for (const std::string_view extension : {".jsonl", ".json"}) {
    if (results_path.size() > extension.size() &&
        results_path.compare(results_path.size() - extension.size(), extension.size(),
                             extension) == 0) {
      return results_path.substr(0, results_path.size() - extension.size()) + ".md";
    }
  }
  return results_path + ".md";
}

absl::Status WriteCourseTable(const std::string& results_path, const std::string& markdown_path) {
  absl::StatusOr<std::vector<proto::ResultRow>> rows = ReadResultsFiles({results_path});
  if (!rows.ok()) return rows.status();
  std::ofstream out(markdown_path, std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", markdown_path));
  return PrintCourseTable(*rows, out);
}

}  // namespace testbed
