// `testbed train` on daemons: each run on testbed-worker (and, for ps,
// testbed-server) daemons this command starts for it - on loopback or each
// in its own network namespace - or on daemons already deployed, reached
// through --coordinator. Either way a run is its TrainingSpec submitted to a
// coordinator, rank 0's rows streamed back.
//
// Thread-safety: the caller's thread, but for the target's Interrupter,
// which a signal thread may call (experiments/cli/submission.h).
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "experiments/cli/submission.h"
#include "experiments/cli/train_flags.h"
#include "experiments/cluster/log_folder.h"
#include "proto/credentials.h"
#include "proto/tls.h"
#include "proto/training.pb.h"
#include "worker/train/training_loop.h"

namespace testbed {

// Where the runs go, made once for a sweep: the job of the daemons `testbed
// train` starts, or the deployed daemons' coordinator and credentials.
struct DaemonTarget {
  Credentials credentials;
  Tls tls;
  std::string log_dir;
  Interrupter* interrupter = nullptr;
};

// The daemons' side of a run: TLS; the job's credentials - the environment's
// for `run`, fresh ones for the daemons this command starts, which also get
// a log folder. 0, or the exit code after saying why on `err`.
int PrepareTarget(const TrainOptions& options, DaemonTarget& target,
                  std::optional<LogFolder>& logs, std::ostream& err);

// Submits `spec` to `coordinator` and hands its rows to `sink`.
absl::Status SubmitRun(const std::string& coordinator, const DaemonTarget& target,
                       const proto::TrainingSpec& spec, int wait_for_workers_s,
                       const TrainingRowSink& sink, std::ostream& err);

// One run on daemons this command starts - N testbed-worker and S
// testbed-server daemons, on loopback or each in its own network namespace -
// through the coordinator, as `testbed local` runs an experiment. Every
// daemon, namespace and link is gone when this returns.
absl::Status RunOnLocalDaemons(const TrainOptions& options, const proto::TrainingSpec& spec,
                               const DaemonTarget& target, const TrainingRowSink& sink,
                               std::ostream& err);

}  // namespace testbed
