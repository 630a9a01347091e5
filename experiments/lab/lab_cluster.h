// The lab's executor: runs a spec on the daemons of a LocalCluster, the same
// testbed-server and N testbed-worker daemons `testbed local` starts - on
// loopback, or each in its own node of an emulated cluster (NetnsFabric) with
// links of a given rate - or on daemons already running elsewhere (compose's
// server and workers, docker/lab.yml), which the lab then neither starts nor
// ends. A started cluster is kept between runs of the same N (a class runs the
// same N again and again) and restarted for another N or after a daemon died.
//
// Thread-safety: Run() from one thread at a time (the LabRunner's); Cancel()
// from any.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <cstdint>
#include <string>

#include <grpcpp/client_context.h>

#include "absl/status/status.h"
#include "experiments/cluster/local_cluster.h"
#include "experiments/cluster/netns_fabric.h"
#include "proto/credentials.h"
#include "proto/experiment.pb.h"

namespace testbed {

struct LabClusterOptions {
  std::string log_dir;      // the started daemons' logs
  std::string coordinator;  // HOST:PORT of running daemons: start none; empty: start them
  bool netns = false;       // start them in an emulated cluster instead of on loopback
  std::uint64_t link_rate_bps = 0;  // netns: each node's link; 0: unlimited
};

class LabCluster {
 public:
  // The daemons inherit the job id and token in `credentials` through the
  // environment, which the caller sets; running ones must have the same.
  LabCluster(Credentials credentials, LabClusterOptions options);
  ~LabCluster();  // ends every daemon it started, and removes its namespaces

  absl::Status Run(const proto::ExperimentSpec& spec,
                   const std::function<void(const proto::ResultRow&)>& on_row,
                   std::ostream& progress);

  // Ends the run in flight, and refuses every later one: the lab is closing,
  // and Ctrl-C should not wait for a run's timeout.
  void Cancel();

 private:
  absl::Status EnsureCluster(int workers, std::ostream& progress);
  void StopCluster();  // daemons first, then the namespaces they lived in

  Credentials credentials_;
  LabClusterOptions options_;
  std::unique_ptr<NetnsFabric> fabric_;  // netns only; outlives cluster_'s daemons
  std::unique_ptr<LocalCluster> cluster_;
  int cluster_workers_ = 0;
  std::mutex mu_;
  grpc::ClientContext* in_flight_ = nullptr;  // guarded by mu_
  bool cancelled_ = false;                    // guarded by mu_
};

}  // namespace testbed
