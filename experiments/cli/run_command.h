// `testbed run`: submit an experiment to daemons already running (compose,
// Swarm, Kubernetes, several hosts) and print its rows, as `testbed local`
// does for the daemons it starts.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "experiments/cli/experiment_flags.h"
#include "proto/tls.h"

namespace testbed {

struct RunOptions {
  ExperimentFlags experiment;
  std::string coordinator;  // HOST:PORT
  int wait_for_workers_s = 60;
  TlsFlags tls;
};

CLI::App* AddRunCommand(CLI::App& app, RunOptions& options);
int RunRun(const RunOptions& options, const CLI::App& command);

}  // namespace testbed
