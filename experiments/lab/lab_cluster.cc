#include "experiments/lab/lab_cluster.h"

#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/link_units.h"
#include "experiments/cli/experiment_client.h"
#include "proto/tls.h"

namespace testbed {

LabCluster::LabCluster(Credentials credentials, LabClusterOptions options)
    : credentials_(std::move(credentials)), options_(std::move(options)) {}

LabCluster::~LabCluster() { StopCluster(); }

void LabCluster::StopCluster() {
  if (cluster_) cluster_->Stop();
  cluster_.reset();
  if (fabric_) fabric_->Destroy();
  fabric_.reset();
}

absl::Status LabCluster::EnsureCluster(int workers, std::ostream& progress) {
  if (!options_.coordinator.empty()) return absl::OkStatus();  // compose's daemons
  if (cluster_ && cluster_workers_ == workers && cluster_->UnexpectedExits().empty()) {
    return absl::OkStatus();
  }
  if (cluster_) {
    for (const std::string& exit : cluster_->UnexpectedExits()) progress << exit << "\n";
  }
  StopCluster();
  constexpr int kServers = 1;
  if (options_.netns) {
    absl::StatusOr<std::unique_ptr<NetnsFabric>> fabric = NetnsFabric::Create(
        {kServers + workers, static_cast<double>(options_.link_rate_bps), ""});
    if (!fabric.ok()) return fabric.status();
    fabric_ = std::move(*fabric);
  }
  LocalClusterOptions options;
  options.workers = workers;
  options.servers = kServers;
  options.log_dir = options_.log_dir;
  options.fabric = fabric_.get();
  absl::StatusOr<std::unique_ptr<LocalCluster>> started = LocalCluster::Start(options);
  if (!started.ok()) {
    StopCluster();
    return started.status();
  }
  cluster_ = std::move(*started);
  cluster_workers_ = workers;
  const std::string where =
      fabric_ ? absl::StrCat("in network namespaces (", fabric_->tag(), "), links ",
                             options_.link_rate_bps == 0 ? std::string("unlimited")
                                                         : FormatLinkRate(options_.link_rate_bps))
              : "on loopback";
  // One write, so the line never reaches a reader half printed.
  progress << absl::StrCat("lab cluster: ", workers, " workers ", where, ", testbed-worker pids ",
                           absl::StrJoin(cluster_->worker_pids(), " "), "\n")
           << std::flush;
  return absl::OkStatus();
}

absl::Status LabCluster::Run(const proto::ExperimentSpec& spec,
                             const std::function<void(const proto::ResultRow&)>& on_row,
                             std::ostream& progress) {
  {
    std::lock_guard lock(mu_);
    if (cancelled_) return absl::CancelledError("the lab is closing");
  }
  if (absl::Status st = EnsureCluster(static_cast<int>(spec.workers()), progress); !st.ok()) {
    return st;
  }
  proto::ExperimentSpec where = spec;
  if (options_.netns) {
    // Rows say where they ran, and the model's beta is the links' rate.
    where.set_network(proto::Network::netns);
    where.set_link_rate_bps(options_.link_rate_bps);
  }
  grpc::ClientContext context;
  {
    std::lock_guard lock(mu_);
    if (cancelled_) return absl::CancelledError("the lab is closing");
    in_flight_ = &context;
  }
  // Plaintext: the started daemons never leave lo or the emulated cluster;
  // compose's share the class network with the lab, as docker-compose.yml's do.
  const Tls plaintext;
  const std::string& coordinator =
      options_.coordinator.empty() ? cluster_->coordinator() : options_.coordinator;
  const absl::Status status =
      SubmitExperiment(coordinator, credentials_, plaintext, where,
                       /*wait_for_workers_s=*/30, context, on_row, progress);
  std::lock_guard lock(mu_);
  in_flight_ = nullptr;
  return status;
}

void LabCluster::Cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  if (in_flight_ != nullptr) in_flight_->TryCancel();
}

}  // namespace testbed
