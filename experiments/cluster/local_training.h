// `testbed train`'s local deployment: N workers as threads of this process,
// each with its own model and its own GradientSync - over the real UCX
// transport on loopback (one UcxTransport per thread, addresses exchanged in
// memory) for the all-reduces, or through PsClient over gRPC on loopback to
// S real testbed-server daemons for "ps" (LocalCluster without workers: the
// coordinator and S-1 shards joined to it, a job id and token of their own,
// every daemon ended by PID when the run ends). Each thread trains its rank
// through TrainRank (worker/train/rank_training.h), as a testbed-worker
// daemon does for the same spec on `--network loopback|netns` and `run`.

// Thread-safety: RunLocalTraining owns its threads and joins them; `sink` is
// called from worker 0's thread only.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "worker/train/dataset.h"
#include "worker/train/rank_training.h"

namespace testbed {

// The thread deployment's options are a run's setup, nothing more.
using LocalTrainingOptions = TrainingSetup;

// Fails with the first worker's error, naming the worker.
absl::Status RunLocalTraining(const LocalTrainingOptions& options, const TrainTestSplit& data,
                              const TrainingRowSink& sink);

}  // namespace testbed
