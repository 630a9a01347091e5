// A worker's whole training run: steps until the config's end, and on the
// reporting worker (worker 0) a progress row after each interval - loss,
// step time split into compute and communication, payload bytes, train and
// test accuracy - and one run row at the end (samples per second, time to
// the target accuracy). Evaluation happens between steps and is not counted
// in the step times; the other workers wait for it in their next
// synchronisation, which is why only worker 0's times are reported.
//
// Thread-safety: runs on the worker's thread; `sink` is called from it.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "proto/training.pb.h"
#include "worker/train/dataset.h"
#include "worker/train/gradient_sync.h"
#include "worker/train/worker_trainer.h"

namespace testbed {

struct ReportConfig {
  std::int64_t every_steps = 0;        // 0: once per epoch (and at the end)
  int train_accuracy_samples = 10000;  // train accuracy on this many samples (0: all)
  double target_accuracy = 0.8;        // for time_to_target_seconds
};

using TrainingRowSink = std::function<void(const proto::TrainingRow&)>;

// `test` is non-null on the reporting worker only; rows start as `header`
// (the run's setup) with the measured fields set.
absl::Status RunTraining(WorkerTrainer& trainer, GradientSync& sync, const Dataset& train,
                         const Dataset* test, const ReportConfig& report,
                         const proto::TrainingRow& header, const TrainingRowSink& sink);

}  // namespace testbed
