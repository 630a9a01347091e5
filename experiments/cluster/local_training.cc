#include "experiments/cluster/local_training.h"

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/collective.h"
#include "allreduce/transport/ucx_transport.h"
#include "experiments/cluster/local_cluster.h"
#include "experiments/cluster/log_folder.h"
#include "worker/ps_client.h"
#include "worker/train/allreduce_sync.h"
#include "worker/train/ps_sync.h"

namespace testbed {
namespace {

namespace fs = std::filesystem;

constexpr std::chrono::seconds kCallTimeout{120};
constexpr std::chrono::seconds kShardStartTimeout{30};

// One job per run, as `testbed local` makes one: the daemons get it through
// their environment, the workers' clients through their calls.
Credentials NewJobCredentials() {
  std::random_device random;
  std::string token;
  for (int i = 0; i < 4; ++i) token += absl::StrCat(absl::Hex(random(), absl::kZeroPad8));
  return {absl::StrCat("train-", getpid()), token};
}

// What one worker thread synchronises through, made on its own thread.
using RankSyncFactory =
    std::function<absl::StatusOr<std::unique_ptr<GradientSync>>(int rank, WorkerTrainer& trainer)>;

// Runs every worker on its own thread. `on_exit` runs on each worker's
// thread once its GradientSync is gone, with how the worker ended: ranks end
// concurrently (a UCX transport's teardown needs its peers to progress), and
// a failed worker can stop the others from waiting for it.
absl::Status RunWorkers(const LocalTrainingOptions& options, const TrainTestSplit& data,
                        const TrainingRowSink& sink, const RankSyncFactory& make_sync,
                        const std::function<void(int rank, const absl::Status&)>& on_exit) {
  const proto::TrainingRow header = TrainingHeader(
      options, data.train,
      RunsOnParameterServer(options.sync) ? "local-threads+server-daemons" : "local-threads");
  std::mutex mu;
  absl::Status first_error;  // guarded by mu
  std::vector<std::thread> threads;
  for (int rank = 0; rank < options.workers; ++rank) {
    threads.emplace_back([&, rank] {
      const absl::Status status = TrainRank(
          options, data, rank, header,
          [&](WorkerTrainer& trainer) { return make_sync(rank, trainer); }, sink);
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

// S testbed-server daemons (the coordinator and S-1 shards joined to it) as
// child processes with a job of their own, for one run; every daemon is
// ended by PID when this is destroyed, also when the run failed.
class ServerDaemons {
 public:
  static absl::StatusOr<std::unique_ptr<ServerDaemons>> Start(int servers) {
    std::unique_ptr<ServerDaemons> daemons(new ServerDaemons());
    absl::StatusOr<LogFolder> logs = LogFolder::Open("", "testbed-train");
    if (!logs.ok()) return logs.status();
    daemons->log_dir_ = logs->path();
    LocalClusterOptions options;
    options.workers = 0;
    options.servers = servers;
    options.log_dir = daemons->log_dir_;
    options.environment = {{"TESTBED_JOB_ID", daemons->credentials_.job_id},
                           {"TESTBED_TOKEN", daemons->credentials_.token}};
    // A daemon that did not start is named with its log: keep the logs then.
    absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
    daemons->keep_logs_ = !cluster.ok();
    if (!cluster.ok()) return cluster.status();
    daemons->cluster_ = *std::move(cluster);
    absl::StatusOr<std::vector<std::string>> shards =
        daemons->cluster_->WaitForShards(kShardStartTimeout);
    daemons->keep_logs_ = !shards.ok();
    if (!shards.ok()) return shards.status();
    daemons->shards_ = *std::move(shards);
    return daemons;
  }
  // The logs are kept only when something went wrong (KeepLogs).
  ~ServerDaemons() {
    cluster_.reset();
    if (!keep_logs_ && !log_dir_.empty()) fs::remove_all(log_dir_);
  }

  // Ends every daemon: their waiting pulls fail, so no worker waits for the
  // push of one that failed. Any thread, more than once.
  void Stop() {
    std::call_once(stopped_, [this] { cluster_->Stop(); });
  }
  // Keeps the daemons' logs, and says where they are.
  std::string KeepLogs() {
    keep_logs_ = true;
    return absl::StrCat("the servers' logs are in ", log_dir_);
  }

  const std::vector<std::string>& shards() const { return shards_; }
  const Credentials& credentials() const { return credentials_; }

 private:
  ServerDaemons() = default;
  const Credentials credentials_ = NewJobCredentials();
  std::string log_dir_;
  std::unique_ptr<LocalCluster> cluster_;
  std::vector<std::string> shards_;  // HOST:PORT by shard
  std::once_flag stopped_;
  bool keep_logs_ = false;
};

absl::Status RunOverParameterServer(const LocalTrainingOptions& options,
                                    const TrainTestSplit& data, const TrainingRowSink& sink) {
  if (options.servers < 1) return absl::InvalidArgumentError("--servers must be at least 1");
  absl::StatusOr<std::unique_ptr<ServerDaemons>> daemons = ServerDaemons::Start(options.servers);
  if (!daemons.ok()) return daemons.status();
  ServerDaemons& servers = **daemons;
  std::vector<std::unique_ptr<PsClient>> clients(options.workers);
  absl::Status status = RunWorkers(
      options, data, sink,
      [&](int rank, WorkerTrainer& trainer) -> absl::StatusOr<std::unique_ptr<GradientSync>> {
        clients[rank] =
            std::make_unique<PsClient>(servers.shards(), servers.credentials(), kCallTimeout);
        return MakePsSync(options, *clients[rank], "train/parameters", rank,
                          trainer.parameters());
      },
      [&](int, const absl::Status& status) {
        if (!status.ok()) servers.Stop();
      });
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat(status.message(), " (", servers.KeepLogs(), ")"));
  }
  return status;
}

absl::Status RunOverUcx(const LocalTrainingOptions& options, const TrainTestSplit& data,
                        const TrainingRowSink& sink) {
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
        return MakeAllReduceSync(options, *transports[rank], count);
      },
      // Each rank closes its own endpoints when it ends; a failed rank's
      // closing turns its peers' waits into "lost connection" errors at once
      // instead of at the wait's deadline.
      [&](int rank, const absl::Status&) { transports[rank].reset(); });
}

}  // namespace

absl::Status RunLocalTraining(const LocalTrainingOptions& options, const TrainTestSplit& data,
                              const TrainingRowSink& sink) {
  // The same checks a daemon makes of the spec it is handed.
  if (options.workers < 1) return absl::InvalidArgumentError("--workers must be at least 1");
  if (RunsOnParameterServer(options.sync) && options.servers < 1) {
    return absl::InvalidArgumentError("--servers must be at least 1");
  }
  if (absl::StatusOr<TrainingSetup> checked = TrainingSetupFromSpec(TrainingSpecOf(options));
      !checked.ok()) {
    return checked.status();
  }
  if (std::int64_t{options.workers} * options.train.batch > data.train.samples()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the global batch (workers x batch = ", options.workers * options.train.batch,
                     ") is larger than the training set (", data.train.samples(), " samples)"));
  }
  if (RunsOnParameterServer(options.sync)) return RunOverParameterServer(options, data, sink);
  return RunOverUcx(options, data, sink);
}

}  // namespace testbed
