#include "experiments/cli/fit_command.h"

#include <set>

#include "absl/status/status.h"
#include "allreduce/cost_model.h"
#include "experiments/cli/cli_common.h"
#include "experiments/cli/setting_flags.h"
#include "experiments/results/result_row.h"
#include "experiments/results/row_fits.h"

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
  AddFormatFlag(*cmd, options.format);
  cmd->footer(
      "Columns: alpha_us (per round), beta_ns_per_byte and link_gbit_s = 8 / beta (the link\n"
      "rate beta implies; 0 when beta <= 0), r2, worst_rel_residual = max |measured - model| / measured.\n"
      "A group needs at least 2 distinct sizes; groups that have fewer are named on stderr.\n"
      "ps rows: 2 rounds of N*M/S bytes, S = the row's servers.\n"
      "Example: testbed fit results.jsonl --format csv");
  return cmd;
}

int RunFit(const std::vector<proto::ResultRow>& rows, OutputFormat format, std::ostream& out,
           std::ostream& err) {
  const absl::StatusOr<std::vector<RowFit>> fits = FitRows(rows, err);
  if (!fits.ok()) {
    err << "error: " << fits.status().message() << "\n";
    return 1;
  }

  Table table({"algorithm", "transport", "workers", "points", "sizes", "alpha_us",
               "beta_ns_per_byte", "link_gbit_s", "r2", "worst_rel_residual"});
  for (const RowFit& group : *fits) {
    const std::string transport = group.transport.empty() ? std::string("-") : group.transport;
    if (!group.fit.ok()) {
      err << group.algorithm << " (" << transport << "): " << group.fit.status().message()
          << "; skipped\n";
      continue;
    }
    const AlphaBetaFit& fit = *group.fit;
    const double beta_ns = fit.link.beta_s_per_byte * 1e9;
    table.AddRow({group.algorithm, transport, Join(group.workers), std::int64_t{fit.points},
                  static_cast<std::int64_t>(group.sizes.size()), fit.link.alpha_s * 1e6, beta_ns,
                  beta_ns > 0 ? 8.0 / beta_ns : 0.0, fit.r_squared, fit.worst_relative_residual});
  }
  if (table.rows().empty()) {
    err << "error: no group of results could be fitted\n";
    return 1;
  }
  table.Print(format, out);
  return 0;
}

int RunFit(const FitOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::vector<proto::ResultRow>> read = ReadResultsFiles(options.files, SpecReader::kCli);
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
