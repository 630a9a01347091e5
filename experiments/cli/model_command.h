// `testbed model`: the alpha-beta cost model's prediction for each algorithm
// (by default ps and every all-reduce in the registry) at N workers and M bytes, read off
// the schedules: rounds, the busiest link's bytes summed over rounds, time.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "common/link_units.h"

namespace testbed {

struct ModelOptions {
  int workers = 4;
  std::string bytes = "16MiB";
  std::string alpha = "50us";
  std::string link_rate = "1gbit";
  int servers = 1;
  std::string dtype = "float32";
  std::vector<std::string> algorithms;  // empty: ps and every all-reduce
  std::string format = "table";
};

CLI::App* AddModelCommand(CLI::App& app, ModelOptions& options);
int RunModel(const ModelOptions& options, std::ostream& out, std::ostream& err);

}  // namespace testbed
