// `testbed traffic`: the payload each all-reduce algorithm moves for N workers
// and M bytes, counted from the schedules (nothing runs), beside docs/design.md's
// closed form.
#pragma once

#include <ostream>
#include "experiments/cli/fabric_flags.h"
#include "experiments/results/table.h"
#include "proto/vocabulary.pb.h"
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace testbed {

struct TrafficOptions {
  int workers = 8;
  std::string bytes = "64MiB";
  proto::Dtype::Kind dtype = proto::Dtype::float32;
  std::vector<std::string> algorithms;  // empty: all four
  OutputFormat format = OutputFormat::kTable;
  FabricFlags fabric;
};

CLI::App* AddTrafficCommand(CLI::App& app, TrafficOptions& options);
int RunTraffic(const TrafficOptions& options, std::ostream& out, std::ostream& err);

}  // namespace testbed
