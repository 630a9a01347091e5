// `testbed train`'s local deployment: N workers as threads of this process,
// each with its own model and its own GradientSync - over the real UCX
// transport on loopback (one UcxTransport per thread, addresses exchanged in
// memory) for the all-reduces, or through PsClient over gRPC on loopback to
// S real testbed-server daemons for "ps" (LocalCluster without workers: the
// coordinator and S-1 shards joined to it, a job id and token of their own,
// every daemon ended by PID when the run ends). The workers are not yet
// testbed-worker daemons: training inside them is a later step.
//
// Thread-safety: RunLocalTraining owns its threads and joins them; `sink` is
// called from worker 0's thread only.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "worker/train/dataset.h"
#include "worker/train/training_loop.h"
#include "worker/train/worker_trainer.h"

namespace testbed {

struct LocalTrainingOptions {
  int workers = 2;
  int servers = 1;               // ps: testbed-server daemons, one shard each
  std::string sync = "ring";     // "ps" or a scheduled all-reduce of the registry
  std::size_t bucket_bytes = 0;  // all-reduce buckets; 0: one
  bool overlap = false;          // all-reduce each bucket during backpropagation
  std::string compress = "none"; // none, fp16, topk:RATIO (worker/train/compression.h)
  TrainConfig train;
  ReportConfig report;
};

// Fails with the first worker's error, naming the worker.
absl::Status RunLocalTraining(const LocalTrainingOptions& options, const TrainTestSplit& data,
                              const TrainingRowSink& sink);

}  // namespace testbed
