// `testbed model`: the alpha-beta cost model's prediction for each algorithm
// (by default ps and every all-reduce in the registry) at N workers and M bytes, read off
// the schedules: rounds, the busiest link's bytes summed over rounds, time.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "common/link_units.h"
#include "experiments/cli/fabric_flags.h"
#include "experiments/results/table.h"
#include "proto/spec.h"
#include "proto/vocabulary.pb.h"

namespace testbed {

struct ModelOptions {
  int workers = 4;
  std::string bytes = "16MiB";
  double alpha_us = kDefaultModelAlphaUs;
  std::uint64_t link_rate_bps = 1000000000;
  int servers = 1;
  proto::Dtype::Kind dtype = proto::Dtype::float32;
  std::vector<std::string> algorithms;  // empty: ps and every all-reduce
  OutputFormat format = OutputFormat::kTable;
  FabricFlags fabric;
};

CLI::App* AddModelCommand(CLI::App& app, ModelOptions& options);
int RunModel(const ModelOptions& options, std::ostream& out, std::ostream& err);

}  // namespace testbed
