#include "experiments/lab/lab_cluster.h"

#include <grpcpp/client_context.h>

#include "absl/strings/str_join.h"
#include "experiments/cli/experiment_client.h"
#include "proto/tls.h"

namespace testbed {

LabCluster::LabCluster(Credentials credentials, std::string log_dir)
    : credentials_(std::move(credentials)), log_dir_(std::move(log_dir)) {}

LabCluster::~LabCluster() {
  if (cluster_) cluster_->Stop();
}

absl::Status LabCluster::EnsureCluster(int workers, std::ostream& progress) {
  if (cluster_ && cluster_workers_ == workers && cluster_->UnexpectedExits().empty()) {
    return absl::OkStatus();
  }
  if (cluster_) {
    for (const std::string& exit : cluster_->UnexpectedExits()) progress << exit << "\n";
    cluster_->Stop();
    cluster_.reset();
  }
  LocalClusterOptions options;
  options.workers = workers;
  options.servers = 1;
  options.log_dir = log_dir_;
  absl::StatusOr<std::unique_ptr<LocalCluster>> started = LocalCluster::Start(options);
  if (!started.ok()) return started.status();
  cluster_ = std::move(*started);
  cluster_workers_ = workers;
  progress << "lab cluster: " << workers << " workers on loopback, testbed-worker pids "
           << absl::StrJoin(cluster_->worker_pids(), " ") << "\n";
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
  grpc::ClientContext context;
  {
    std::lock_guard lock(mu_);
    if (cancelled_) return absl::CancelledError("the lab is closing");
    in_flight_ = &context;
  }
  const Tls plaintext;  // loopback only: the lab's daemons never leave lo
  const absl::Status status =
      SubmitExperiment(cluster_->coordinator(), credentials_, plaintext, spec,
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
