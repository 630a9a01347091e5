// `testbed trace`: a collective told round by round, for students - who sends
// which element range to whom, whether the receiver reduces or copies, and
// every rank's buffer after each round of a real in-process run.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "experiments/cli/fabric_flags.h"

namespace testbed {

struct TraceOptions {
  std::string algorithm = "ring";
  int workers = 4;
  std::int64_t count = 8;
  int root = 0;
  int max_elements = 24;  // buffer columns printed per rank
  FabricFlags fabric;      // racks: hierarchical reads them; sends across racks are marked
};

CLI::App* AddTraceCommand(CLI::App& app, TraceOptions& options);
int RunTrace(const TraceOptions& options, std::ostream& out, std::ostream& err);

}  // namespace testbed
