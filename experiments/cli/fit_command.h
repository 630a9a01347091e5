// `testbed fit`: alpha and beta of the cost model fitted to measured times.
// Reads the JSON lines `testbed local --out` writes, groups the result records
// by (algorithm, transport), and fits time = alpha * rounds + beta *
// bottleneck_bytes by least squares (alpha, beta >= 0), the two terms read off
// the schedules for
// each row's N and M (ps: 2 rounds of N*M/S, S = the row's servers).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "experiments/results/table.h"
#include "proto/experiment.pb.h"

namespace testbed {

struct FitOptions {
  std::vector<std::string> files;
  OutputFormat format = OutputFormat::kTable;
};

CLI::App* AddFitCommand(CLI::App& app, FitOptions& options);
// Fits every group of rows; prints one row per group that could be fitted.
int RunFit(const std::vector<proto::ResultRow>& rows, OutputFormat format, std::ostream& out,
           std::ostream& err);
int RunFit(const FitOptions& options, std::ostream& out, std::ostream& err);

}  // namespace testbed
