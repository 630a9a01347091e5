// `testbed local`: start a coordinator, parameter-server shards and N workers
// as child processes - on loopback, or each in its own network namespace
// behind a rate-limited link - submit the experiment to them as `testbed run`
// would, and remove everything it started, also on failure and Ctrl-C.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "experiments/cli/experiment_flags.h"
#include "experiments/cli/submission.h"
#include "proto/experiment.pb.h"
#include "proto/tls.h"

namespace testbed {

struct LocalOptions {
  ExperimentFlags experiment;
  std::string log_dir;    // default: a fresh folder under /tmp, removed on success
  bool keep_logs = false;
  TlsFlags tls;           // for the daemons it starts and its own channel
};

CLI::App* AddLocalCommand(CLI::App& app, LocalOptions& options);
int RunLocal(const LocalOptions& options, const CLI::App& command);

// Each of `specs` (valid, one N each) on a cluster of its own, one after the
// other, their rows into `sink`, the daemons gone after each; stops at the
// first that fails. Returns the exit code. `testbed workload --run` replays
// a trace's collectives with it.
int RunLocalSpecs(const LocalOptions& options, const std::vector<proto::ExperimentSpec>& specs,
                  RowSink& sink);

}  // namespace testbed
