// `testbed fit`: alpha and beta of the cost model fitted to measured times.
// Reads the JSON lines `testbed local --out` writes, groups the result records
// by (algorithm, transport), and fits time = alpha * rounds + beta *
// bottleneck_bytes by least squares (alpha, beta >= 0), the two terms read off
// the schedules for
// each row's N and M (ps: 2 rounds of N*M/S, S = the row's servers).
#pragma once

#include <istream>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"

namespace testbed {

// A flat JSON object's scalar members: numbers as double, strings, booleans;
// null, lists and nested objects are parsed and left out.
using JsonScalar = std::variant<double, std::string, bool>;
using FlatJsonObject = std::map<std::string, JsonScalar, std::less<>>;
absl::StatusOr<FlatJsonObject> ParseFlatJsonObject(std::string_view line);

// One "record": "result" line, the fields the fit needs.
struct MeasuredRow {
  std::string algorithm;
  std::string transport;  // "" when absent
  std::string dtype;      // "float32" when absent
  int workers = 0;
  std::int64_t bytes = 0;
  int servers = 1;
  double time_us_avg = 0;
  // Read where present (the course table shows them; the fit needs none).
  std::optional<double> payload_bytes_total, theory_bytes_total, wire_bytes_sent_total,
      wire_bytes_received_total, model_time_us, rounds;
};

// Result records of a results file; other records and blank lines are skipped.
// Errors name the line.
absl::StatusOr<std::vector<MeasuredRow>> ReadMeasuredRows(std::istream& in);

// The result records of several results files, in order; errors name the file.
absl::StatusOr<std::vector<MeasuredRow>> ReadResultsFiles(const std::vector<std::string>& files);

struct FitOptions {
  std::vector<std::string> files;
  std::string format = "table";
};

CLI::App* AddFitCommand(CLI::App& app, FitOptions& options);
// Fits every group of rows; prints one row per group that could be fitted.
int RunFit(const std::vector<MeasuredRow>& rows, const std::string& format, std::ostream& out,
           std::ostream& err);
int RunFit(const FitOptions& options, std::ostream& out, std::ostream& err);

}  // namespace testbed
