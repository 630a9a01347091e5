// `testbed model`: the alpha-beta cost model's prediction for each algorithm
// (ps and the four all-reduce algorithms) at N workers and M bytes, read off
// the schedules: rounds, the busiest link's bytes summed over rounds, time.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"

namespace testbed {

// "50us", "1.5ms", "10ns", "0.001s" -> seconds. A unit is required (0 may go without).
absl::StatusOr<double> ParseDuration(std::string_view text);
// "100mbit", "1gbit", "10gbit", "500kbit" (decimal, as tc writes them), or plain
// bits per second ("1000000000") -> bits per second, > 0.
absl::StatusOr<double> ParseLinkRate(std::string_view text);

struct ModelOptions {
  int workers = 4;
  std::string bytes = "16MiB";
  std::string alpha = "50us";
  std::string link_rate = "1gbit";
  int servers = 1;
  std::string dtype = "float32";
  std::vector<std::string> algorithms;  // empty: ps and the four all-reduce algorithms
  std::string format = "table";
};

CLI::App* AddModelCommand(CLI::App& app, ModelOptions& options);
int RunModel(const ModelOptions& options, std::ostream& out, std::ostream& err);

}  // namespace testbed
