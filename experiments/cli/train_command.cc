#include "experiments/cli/train_command.h"

#include <unistd.h>

#include <fstream>
#include <optional>
#include <vector>

#include "common/signal_waiter.h"
#include "experiments/cli/submission.h"
#include "experiments/cli/train_daemons.h"
#include "experiments/cli/train_sweep.h"
#include "experiments/cluster/local_training.h"
#include "experiments/cluster/log_folder.h"
#include "worker/train/dataset.h"

namespace testbed {
namespace {

// What must hold before anything starts: root for the emulated cluster, a
// writable --out. 0, or the exit code after saying why on `err`.
int CheckCanStart(const TrainOptions& options, const proto::TrainingSpec& spec,
                  std::ofstream& jsonl, std::ostream& err) {
  if (spec.network() == proto::Network::netns && geteuid() != 0) {
    err << "testbed train: --network netns needs root (it creates network namespaces, links "
           "and tc limits); run it as root, or leave out --network\n";
    return 2;
  }
  if (!options.out.empty()) {
    jsonl.open(options.out);
    if (!jsonl) {
      err << "testbed train: cannot write " << options.out << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace

int RunTrain(const TrainOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<proto::TrainingSpec> spec = BuildTrainingSpec(options);
  if (!spec.ok()) {
    err << "testbed train: " << spec.status().message() << "\n";
    return 2;
  }
  std::ofstream jsonl;
  if (const int code = CheckCanStart(options, *spec, jsonl, err); code != 0) return code;
  const bool threads = options.deployment == "local" && !spec->has_network();
  // The threads train on this process's copy of the data; daemons load their own.
  std::optional<TrainTestSplit> data;
  if (threads) {
    absl::StatusOr<TrainTestSplit> loaded =
        LoadFashionMnist(spec->data_dir().empty() ? kFashionMnistDir : spec->data_dir());
    if (!loaded.ok()) {
      err << "testbed train: " << loaded.status().message() << "\n";
      return 1;
    }
    data = *std::move(loaded);
  }
  // Daemons: their job's credentials, TLS, logs, and Ctrl-C (which threads
  // leave to the default action: nothing outlives this process there).
  DaemonTarget target;
  Interrupter interrupter;
  target.interrupter = &interrupter;
  std::optional<SignalWaiter> waiter;
  std::optional<LogFolder> logs;
  if (!threads) {
    if (const int code = PrepareTarget(options, target, logs, err); code != 0) return code;
    waiter.emplace([&](int) { interrupter.Interrupt(); });
  }
  const RunOneTraining run_one = [&](const proto::TrainingSpec& one,
                                     const TrainingRowSink& sink) {
    if (threads) return RunLocalTraining(*TrainingSetupFromSpec(one), *data, sink);
    if (options.deployment == "run") {
      return SubmitRun(options.coordinator, target, one, options.wait_for_workers_s, sink, err);
    }
    return RunOnLocalDaemons(options, one, target, sink, err);
  };
  const absl::Status status = RunTrainingSweep(ExpandTrainingSpec(*spec), run_one,
                                               jsonl.is_open() ? &jsonl : nullptr, out, err);
  if (logs) logs->Finish(status.ok(), /*keep=*/false, err, "testbed train");
  if (status.ok()) return 0;
  return interrupter.interrupted() ? kInterrupted : 1;
}

}  // namespace testbed
