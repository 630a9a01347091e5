#include "experiments/cli/train_daemons.h"

#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/link_units.h"
#include "experiments/cli/experiment_client.h"
#include "experiments/cluster/local_cluster.h"
#include "experiments/cluster/lost_daemon_watchdog.h"
#include "experiments/cluster/netns_fabric.h"
#include "proto/training_spec.h"
#include "allreduce/collective.h"

namespace testbed {
namespace {

// Where a run's daemons go: the emulated cluster of a netns run (null on
// loopback), and what every daemon's environment gets on top of ours - the
// job's credentials, and the UCX devices the network means.
struct DaemonPlacement {
  std::unique_ptr<NetnsFabric> fabric;
  std::vector<std::pair<std::string, std::string>> environment;
};

absl::StatusOr<DaemonPlacement> PlaceDaemons(const proto::TrainingSpec& spec, int nodes,
                                             const Credentials& credentials, std::ostream& err) {
  DaemonPlacement placement;
  placement.environment = {{"TESTBED_JOB_ID", credentials.job_id},
                           {"TESTBED_TOKEN", credentials.token}};
  if (spec.network() != proto::Network::netns) {
    if (std::getenv("UCX_NET_DEVICES") == nullptr) {
      placement.environment.emplace_back("UCX_NET_DEVICES", "lo");  // loopback means loopback
    }
    return placement;
  }
  const double rate = static_cast<double>(spec.link_rate_bps());
  absl::StatusOr<std::unique_ptr<NetnsFabric>> created = NetnsFabric::Create({nodes, rate, ""});
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat("cannot build the emulated cluster: ",
                                     created.status().message()));
  }
  placement.fabric = *std::move(created);
  // One device per node, and no shared memory across the links measured.
  placement.environment.emplace_back("UCX_TLS", "tcp");
  placement.environment.emplace_back("UCX_NET_DEVICES", NetnsFabric::kNodeDevice);
  err << "testbed train: emulated cluster " << placement.fabric->tag() << ": " << nodes
      << " nodes, each link " << (spec.link_rate_bps() == 0 ? "unlimited" : FormatLinkRate(spec.link_rate_bps()))
      << std::endl;
  return placement;
}

}  // namespace

int PrepareTarget(const TrainOptions& options, DaemonTarget& target,
                  std::optional<LogFolder>& logs, std::ostream& err) {
  absl::StatusOr<Tls> tls = LoadTls(options.tls, /*need_identity=*/options.deployment == "local");
  if (!tls.ok()) {
    err << "testbed train: " << tls.status().message() << "\n";
    return 2;
  }
  target.tls = *tls;
  if (options.deployment == "run") {
    absl::StatusOr<Credentials> credentials = CredentialsFromEnvironment();
    if (!credentials.ok()) {
      err << "testbed train: " << credentials.status().message() << "\n";
      return 2;
    }
    target.credentials = *credentials;
    if (const std::string warning = PlaintextWarning(*tls, options.coordinator);
        !warning.empty()) {
      err << "testbed train: warning: " << warning << "\n";
    }
    return 0;
  }
  target.credentials = {absl::StrCat("train-", getpid()), RandomHex(16)};
  absl::StatusOr<LogFolder> folder = LogFolder::Open(options.log_dir, "testbed-train");
  if (!folder.ok()) {
    err << "testbed train: " << folder.status().message() << "\n";
    return 1;
  }
  target.log_dir = folder->path();
  logs = *std::move(folder);
  return 0;
}

absl::Status SubmitRun(const std::string& coordinator, const DaemonTarget& target,
                       const proto::TrainingSpec& spec, int wait_for_workers_s,
                       const TrainingRowSink& sink, std::ostream& err) {
  grpc::ClientContext context;
  target.interrupter->SetCurrent(&context);
  absl::Status status = SubmitTraining(coordinator, target.credentials, target.tls, spec,
                                       wait_for_workers_s, context, sink, err);
  target.interrupter->SetCurrent(nullptr);
  return status;
}

absl::Status RunOnLocalDaemons(const TrainOptions& options, const proto::TrainingSpec& spec,
                               const DaemonTarget& target, const TrainingRowSink& sink,
                               std::ostream& err) {
  // The run's size, its unset fields at their defaults; a run without ps
  // still has one testbed-server, the coordinator.
  proto::TrainingSpec sized = spec;
  ApplyRunDefaults(sized);
  const int workers = static_cast<int>(sized.workers());
  const int servers = RunsOnParameterServer(sized.sync()) ? static_cast<int>(sized.servers()) : 1;
  absl::StatusOr<DaemonPlacement> placement =
      PlaceDaemons(spec, servers + workers, target.credentials, err);
  if (!placement.ok()) return placement.status();
  std::unique_ptr<NetnsFabric> fabric = std::move(placement->fabric);
  LocalClusterOptions cluster_options;
  cluster_options.workers = workers;
  cluster_options.servers = servers;
  cluster_options.log_dir = target.log_dir;
  cluster_options.fabric = fabric.get();
  cluster_options.tls = options.tls;
  cluster_options.environment = std::move(placement->environment);
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(cluster_options);
  if (!cluster.ok()) {
    if (fabric) fabric->Destroy();
    return cluster.status();
  }
  LocalCluster& c = **cluster;
  err << absl::StrCat("testbed train: ", c.Whereabouts(), "\n") << std::flush;
  LostDaemonWatchdog watchdog(c, [&] { target.interrupter->CancelCurrent(); });
  absl::Status status = SubmitRun(c.coordinator(), target, spec, /*wait_for_workers_s=*/30,
                                  sink, err);
  watchdog.Stop();
  if (!status.ok() && !target.interrupter->interrupted()) {
    // The workers of a failed run exit on their own: let them, so their exits
    // are reported rather than our kill. An interrupted run is stopped now:
    // Ctrl-C ends it within a second (docs/security.md, "Signals").
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  const std::vector<std::string> exits = c.UnexpectedExits();
  c.Stop();
  cluster->reset();  // every daemon is gone before its namespace goes
  if (fabric) fabric->Destroy();
  for (const std::string& exit : exits) err << "testbed train: " << exit << "\n";
  return status;
}

}  // namespace testbed
