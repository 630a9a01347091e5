// `testbed local` (start the daemons on loopback, then run) and `testbed run`
// (submit to daemons already running: compose, several hosts). Both submit
// the same ExperimentSpec to the same coordinator and print the same rows.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "experiments/cli/experiment_flags.h"
#include "proto/tls.h"

namespace testbed {

struct LocalOptions {
  ExperimentFlags experiment;
  std::string log_dir;    // default: a fresh folder under /tmp, removed on success
  bool keep_logs = false;
  TlsFlags tls;           // for the daemons it starts and its own channel
};

struct RunOptions {
  ExperimentFlags experiment;
  std::string coordinator;  // HOST:PORT
  int wait_for_workers_s = 60;
  TlsFlags tls;
};

CLI::App* AddLocalCommand(CLI::App& app, LocalOptions& options);
CLI::App* AddRunCommand(CLI::App& app, RunOptions& options);
int RunLocal(const LocalOptions& options, const CLI::App& command);
int RunRun(const RunOptions& options, const CLI::App& command);

}  // namespace testbed
