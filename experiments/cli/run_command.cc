#include "experiments/cli/run_command.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/signal_waiter.h"
#include "experiments/cli/submission.h"
#include "proto/spec.h"

namespace testbed {

CLI::App* AddRunCommand(CLI::App& app, RunOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Submit an experiment to a running coordinator (compose, several hosts) and print one row "
      "per (algorithm, size). TESTBED_JOB_ID and TESTBED_TOKEN must match the daemons'.");
  cmd->add_option("-c,--coordinator", options.coordinator, "The coordinator's HOST:PORT")
      ->required();
  cmd->add_option("--wait-for-workers", options.wait_for_workers_s,
                  "Seconds to wait for N workers to attach")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  AddExperimentFlags(*cmd, options.experiment);
  AddTlsFlags(*cmd, options.tls);
  return cmd;
}

int RunRun(const RunOptions& options, const CLI::App& command) {
  absl::StatusOr<proto::ExperimentSpec> spec = BuildSpec(options.experiment, command);
  if (!spec.ok()) {
    std::cerr << "error: " << spec.status().message() << "\n";
    return 2;
  }
  if (spec->worker_counts_size() > 1) {
    std::cerr << "error: a sweep over N (" << spec->worker_counts_size()
              << " worker counts) needs testbed local; running daemons are one N\n";
    return 2;
  }
  if (spec->network() != proto::Network::loopback) {
    std::cerr << "error: --network places the daemons of testbed local; testbed run uses the "
                 "daemons already running\n";
    return 2;
  }
  absl::StatusOr<Credentials> credentials = CredentialsFromEnvironment();
  if (!credentials.ok()) {
    std::cerr << "error: " << credentials.status().message() << "\n";
    return 2;
  }
  const absl::StatusOr<Tls> tls = LoadTls(options.tls, /*need_identity=*/false);
  if (!tls.ok()) {
    std::cerr << "error: " << tls.status().message() << "\n";
    return 2;
  }
  if (const std::string warning = PlaintextWarning(*tls, options.coordinator); !warning.empty()) {
    std::cerr << "testbed run: warning: " << warning << "\n";
  }
  if (!CanWriteResults(options.experiment.out)) return 2;
  const absl::StatusOr<Tuning> tuning = ReadTuning(options.experiment);
  if (!tuning.ok()) {
    std::cerr << "error: " << tuning.status().message() << "\n";
    return 2;
  }
  Interrupter interrupter;
  SignalWaiter waiter([&](int) { interrupter.Interrupt(); });
  RowSink sink(options.experiment);
  const absl::Status status = SubmitAndRecord(
      options.experiment, *spec,
      {options.coordinator, *credentials, *tls, options.wait_for_workers_s,
       absl::StrCat("daemons at ", options.coordinator)},
      *tuning, interrupter, sink);
  sink.PrintTable();
  int code = ExitCode(status, interrupter);
  if (!WriteTimelineIfAsked(options.experiment, *spec, sink,
                            absl::StrCat("daemons at ", options.coordinator), std::cerr) &&
      code == 0) {
    code = 1;
  }
  if (code == 0 && !options.experiment.out.empty()) {
    std::cerr << "results appended to " << options.experiment.out << "\n";
  }
  return code;
}

}  // namespace testbed
