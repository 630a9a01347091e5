#include "experiments/cli/fit_command.h"

#include <cmath>
#include <fstream>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "allreduce/cost_model.h"
#include "experiments/cli/cli_common.h"
#include "experiments/results/result_row.h"

namespace testbed {
namespace {

std::string Join(const std::set<std::int64_t>& values) {
  std::string out;
  for (std::int64_t v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

}  // namespace

CLI::App* AddFitCommand(CLI::App& app, FitOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "fit",
      "Fits the alpha-beta cost model to measured times: per (algorithm, transport), "
      "time_us_avg = alpha * rounds + beta * bottleneck_bytes, both terms read off the "
      "schedules for each row's workers and bytes; least squares, alpha and beta >= 0.");
  cmd->add_option("files", options.files, "Results files written by 'testbed local --out'")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-f,--format", options.format, "table, csv or json (one object per line)")
      ->check(FormatValidator())
      ->capture_default_str();
  cmd->footer(
      "Columns: alpha_us (per round), beta_ns_per_byte and link_gbit_s = 8 / beta (the link\n"
      "rate beta implies; 0 when beta <= 0), r2, worst_rel_residual = max |measured - model| / measured.\n"
      "A group needs at least 2 distinct sizes; groups that have fewer are named on stderr.\n"
      "ps rows: 2 rounds of N*M/S bytes, S = the row's servers.\n"
      "Example: testbed fit results.jsonl --format csv");
  return cmd;
}

int RunFit(const std::vector<proto::ResultRow>& rows, const std::string& format_name,
           std::ostream& out, std::ostream& err) {
  const auto format = ParseOutputFormat(format_name);
  if (!format) {
    err << "error: unknown format '" << format_name << "'\n";
    return 2;
  }
  struct Group {
    std::vector<FitPoint> points;
    std::set<std::int64_t> sizes, workers;
  };
  std::map<std::pair<std::string, std::string>, Group> groups;
  std::vector<std::pair<std::string, std::string>> order;  // first appearance
  for (const proto::ResultRow& row : rows) {
    const absl::StatusOr<CostEstimate> e = EstimateRow(row, LinkModel{});
    if (!e.ok()) {
      err << "warning: skipping a row of " << row.algorithm() << ": " << e.status().message()
          << "\n";
      continue;
    }
    const auto key = std::make_pair(row.algorithm(), row.transport());
    if (!groups.contains(key)) order.push_back(key);
    Group& g = groups[key];
    g.points.push_back(FitPoint{e->rounds, e->bottleneck_bytes, row.time_us_avg() * 1e-6});
    g.sizes.insert(row.bytes());
    g.workers.insert(row.workers());
  }

  Table table({"algorithm", "transport", "workers", "points", "sizes", "alpha_us",
               "beta_ns_per_byte", "link_gbit_s", "r2", "worst_rel_residual"});
  for (const auto& key : order) {
    const Group& g = groups[key];
    const std::string name = key.first + " (" + (key.second.empty() ? "-" : key.second) + ")";
    if (g.sizes.size() < 2) {
      err << name << ": needs at least 2 distinct sizes to fit alpha and beta, has "
          << g.sizes.size() << "; skipped\n";
      continue;
    }
    const auto fit = FitAlphaBeta(g.points);
    if (!fit.ok()) {
      err << name << ": " << fit.status().message() << "; skipped\n";
      continue;
    }
    const double beta_ns = fit->link.beta_s_per_byte * 1e9;
    table.AddRow({key.first, key.second.empty() ? std::string("-") : key.second,
                  Join(g.workers), std::int64_t{fit->points},
                  static_cast<std::int64_t>(g.sizes.size()), fit->link.alpha_s * 1e6, beta_ns,
                  beta_ns > 0 ? 8.0 / beta_ns : 0.0, fit->r_squared,
                  fit->worst_relative_residual});
  }
  if (table.rows().empty()) {
    err << "error: no group of results could be fitted\n";
    return 1;
  }
  table.Print(*format, out);
  return 0;
}

int RunFit(const FitOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::vector<proto::ResultRow>> read = ReadResultsFiles(options.files);
  if (!read.ok()) {
    err << "error: " << read.status().message() << "\n";
    return 2;
  }
  const std::vector<proto::ResultRow>& rows = *read;
  if (rows.empty()) {
    err << "error: no result records in " << options.files.front() << "\n";
    return 1;
  }
  return RunFit(rows, options.format, out, err);
}

}  // namespace testbed
