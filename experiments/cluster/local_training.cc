#include "experiments/cluster/local_training.h"

#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/collective.h"
#include "allreduce/transport/ucx_transport.h"
#include "server/in_process_shard.h"
#include "worker/ps_client.h"
#include "worker/train/allreduce_sync.h"
#include "worker/train/ps_sync.h"

namespace testbed {
namespace {

constexpr std::chrono::seconds kCallTimeout{120};

// The job the in-process shard and its clients share.
Credentials JobCredentials() { return {"train-local", "train-local"}; }

// What one worker thread synchronises through, made on its own thread.
using SyncFactory =
    std::function<absl::StatusOr<std::unique_ptr<GradientSync>>(int rank, WorkerTrainer& trainer)>;

proto::TrainingRow Header(const LocalTrainingOptions& options, const Dataset& train) {
  proto::TrainingRow header;
  header.set_sync(options.sync);
  header.set_workers(static_cast<std::uint32_t>(options.workers));
  header.set_deployment("local-threads");
  for (int size : WorkerTrainer::LayerSizes(options.train, train)) header.add_layer_sizes(size);
  header.set_parameters(Mlp(WorkerTrainer::LayerSizes(options.train, train)).parameter_count());
  header.set_batch_per_worker(static_cast<std::uint32_t>(options.train.batch));
  header.set_optimizer(options.train.optimizer);
  header.set_learning_rate(options.train.learning_rate);
  header.set_seed(options.train.seed);
  header.set_bucket_bytes(options.bucket_bytes);
  header.set_overlap(options.overlap);
  return header;
}

// Runs every worker on its own thread. `on_exit` runs on each worker's
// thread once its GradientSync is gone, with how the worker ended: ranks end
// concurrently (a UCX transport's teardown needs its peers to progress), and
// a failed worker can stop the others from waiting for it.
absl::Status RunWorkers(const LocalTrainingOptions& options, const TrainTestSplit& data,
                        const TrainingRowSink& sink, const SyncFactory& make_sync,
                        const std::function<void(int rank, const absl::Status&)>& on_exit) {
  const proto::TrainingRow header = Header(options, data.train);
  std::mutex mu;
  absl::Status first_error;  // guarded by mu
  std::vector<std::thread> threads;
  for (int rank = 0; rank < options.workers; ++rank) {
    threads.emplace_back([&, rank] {
      absl::Status status;
      {
        WorkerTrainer trainer(options.train, data.train, rank, options.workers);
        absl::StatusOr<std::unique_ptr<GradientSync>> sync = make_sync(rank, trainer);
        status = sync.status();
        if (status.ok()) {
          status = RunTraining(trainer, **sync, data.train, rank == 0 ? &data.test : nullptr,
                               options.report, header, sink);
        }
      }
      if (!status.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) {
          first_error =
              absl::Status(status.code(), absl::StrCat("worker ", rank, ": ", status.message()));
        }
      }
      on_exit(rank, status);
    });
  }
  for (std::thread& thread : threads) thread.join();
  return first_error;
}

absl::Status RunOverParameterServer(const LocalTrainingOptions& options,
                                    const TrainTestSplit& data, const TrainingRowSink& sink,
                                    const proto::Optimizer& optimizer) {
  absl::StatusOr<std::unique_ptr<InProcessShard>> shard =
      InProcessShard::Start(JobCredentials(), kCallTimeout);
  if (!shard.ok()) return shard.status();
  std::vector<std::unique_ptr<PsClient>> clients(options.workers);
  return RunWorkers(
      options, data, sink,
      [&](int rank, WorkerTrainer& trainer) -> absl::StatusOr<std::unique_ptr<GradientSync>> {
        clients[rank] = std::make_unique<PsClient>(std::vector<std::string>{(*shard)->address()},
                                                   JobCredentials(), kCallTimeout);
        absl::StatusOr<std::unique_ptr<PsSync>> sync =
            PsSync::Create(*clients[rank], "train/parameters", static_cast<std::uint32_t>(rank),
                           options.workers, trainer.parameters(), optimizer);
        if (!sync.ok()) return sync.status();
        return std::unique_ptr<GradientSync>(*std::move(sync));
      },
      [&](int, const absl::Status& status) {
        if (!status.ok()) (*shard)->Stop();
      });
}

absl::Status RunOverUcx(const LocalTrainingOptions& options, const TrainTestSplit& data,
                        const TrainingRowSink& sink, const Collective& collective,
                        const proto::Optimizer& optimizer) {
  std::vector<std::unique_ptr<UcxTransport>> transports;
  std::vector<std::vector<std::byte>> addresses;
  for (int rank = 0; rank < options.workers; ++rank) {
    absl::StatusOr<std::unique_ptr<UcxTransport>> transport =
        UcxTransport::Create(rank, options.workers);
    if (!transport.ok()) return transport.status();
    addresses.push_back((*transport)->WorkerAddress());
    transports.push_back(*std::move(transport));
  }
  for (auto& transport : transports) {
    if (absl::Status s = transport->Connect(addresses); !s.ok()) return s;
  }
  const std::int64_t count =
      Mlp(WorkerTrainer::LayerSizes(options.train, data.train)).parameter_count();
  return RunWorkers(
      options, data, sink,
      [&](int rank, WorkerTrainer&) -> absl::StatusOr<std::unique_ptr<GradientSync>> {
        absl::StatusOr<std::unique_ptr<AllReduceSync>> sync = AllReduceSync::Create(
            collective, *transports[rank], count, options.bucket_bytes, optimizer, options.overlap);
        if (!sync.ok()) return sync.status();
        return std::unique_ptr<GradientSync>(*std::move(sync));
      },
      // Each rank closes its own endpoints when it ends; a failed rank's
      // closing turns its peers' waits into "lost connection" errors at once
      // instead of at the wait's deadline.
      [&](int rank, const absl::Status&) { transports[rank].reset(); });
}

}  // namespace

absl::Status RunLocalTraining(const LocalTrainingOptions& options, const TrainTestSplit& data,
                              const TrainingRowSink& sink) {
  absl::StatusOr<proto::Optimizer> optimizer = OptimizerConfig(
      options.train.optimizer, options.train.learning_rate, options.train.momentum);
  if (!optimizer.ok()) return optimizer.status();
  if (options.workers < 1) return absl::InvalidArgumentError("--workers must be at least 1");
  if (std::int64_t{options.workers} * options.train.batch > data.train.samples()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the global batch (workers x batch = ", options.workers * options.train.batch,
                     ") is larger than the training set (", data.train.samples(), " samples)"));
  }
  if (options.sync == "ps") {
    if (options.overlap) {
      return absl::InvalidArgumentError("--overlap needs an all-reduce: the ps sync has no buckets yet");
    }
    return RunOverParameterServer(options, data, sink, *optimizer);
  }
  const Collective* collective = FindCollective(options.sync, Kinds::kScheduledAllReduce);
  if (collective == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown --sync '", options.sync, "' (choose from ps, ",
        CollectiveNames(Kinds::kScheduledAllReduce), ")"));
  }
  return RunOverUcx(options, data, sink, *collective, *optimizer);
}

}  // namespace testbed
