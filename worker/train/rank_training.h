// One rank of a data-parallel training run, the same in every deployment:
// the threads of `testbed train`'s local deployment
// (experiments/cluster/local_training.cc) and the testbed-worker daemons
// (worker/control_handlers.cc) both train through TrainRank, from the same
// setup - a TrainingSpec (proto/training.proto) with its defaults applied.
//
// Thread-safety: plain functions; TrainRank runs on the rank's own thread and
// calls `sink` from it (rank 0 only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "allreduce/transport/transport.h"
#include "proto/training.pb.h"
#include "proto/training_spec.h"
#include "worker/ps_client.h"
#include "worker/train/compression.h"
#include "worker/train/dataset.h"
#include "worker/train/gradient_sync.h"
#include "worker/train/ps_sync.h"
#include "worker/train/training_loop.h"
#include "worker/train/worker_trainer.h"

namespace testbed {

// A run's setup in the types the trainer takes: a TrainingSpec of one run,
// defaults applied (TrainingSetupFromSpec).
struct TrainingSetup {
  int workers = kDefaultTrainingWorkers;
  int servers = kDefaultTrainingServers;  // ps: testbed-server daemons, one shard each
  std::string sync = kDefaultTrainingSync;  // "ps" or a scheduled all-reduce of the registry
  std::size_t bucket_bytes = 0;  // all-reduce buckets; 0: one
  bool overlap = false;          // all-reduce each bucket during backpropagation
  CompressionConfig compression;  // worker/train/compression.h
  std::optional<PsMode> ps_mode;  // ps only (worker/train/ps_sync.h); unset: synchronous
  TrainConfig train;
  ReportConfig report;
};

// `spec` (one run: no sweep axes) with the defaults of its unset fields;
// refuses by name an unknown sync, optimizer, scaling, compression or ps mode,
// overlap with ps, a ps mode without ps, and a run of no workers or servers.
absl::StatusOr<TrainingSetup> TrainingSetupFromSpec(const proto::TrainingSpec& spec);
// The spec of `setup`, every field set (the reverse of TrainingSetupFromSpec).
proto::TrainingSpec TrainingSpecOf(const TrainingSetup& setup);

// The run's setup, the first fields of every row; `deployment` says where the
// ranks ran (TrainingRow.deployment).
proto::TrainingRow TrainingHeader(const TrainingSetup& setup, const Dataset& train,
                                  const std::string& deployment);

// Makes the rank's GradientSync, given its trainer (whose parameters a ps
// sync declares).
using SyncFactory =
    std::function<absl::StatusOr<std::unique_ptr<GradientSync>>(WorkerTrainer& trainer)>;

// Trains rank `rank` of setup.workers: its WorkerTrainer over data.train, the
// sync `make_sync` makes, the training loop; rank 0 evaluates on data.test
// and hands its rows, starting as `header`, to `sink`. The sync is gone when
// this returns.
absl::Status TrainRank(const TrainingSetup& setup, const TrainTestSplit& data, int rank,
                       const proto::TrainingRow& header, const SyncFactory& make_sync,
                       const TrainingRowSink& sink);

// The all-reduce sync of `setup` over `transport` (connected, setup.workers
// ranks) for `parameters` floats.
absl::StatusOr<std::unique_ptr<GradientSync>> MakeAllReduceSync(const TrainingSetup& setup,
                                                                 Transport& transport,
                                                                 std::int64_t parameters);
// The parameter server's sync of `setup` through `client`, as worker `rank`,
// declaring `tensor` with the trainer's initial parameters.
absl::StatusOr<std::unique_ptr<GradientSync>> MakePsSync(const TrainingSetup& setup,
                                                         PsClient& client, std::string tensor,
                                                         int rank,
                                                         std::span<const float> initial);

}  // namespace testbed
