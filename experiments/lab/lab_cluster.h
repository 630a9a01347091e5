// The lab's executor: runs a spec on a LocalCluster of testbed-server and N
// testbed-worker daemons on loopback, the same daemons `testbed local`
// starts. The cluster is kept between runs of the same N (a class runs the
// same N again and again) and restarted for another N or after a daemon died.
//
// Thread-safety: Run() from one thread at a time (the LabRunner's); Cancel()
// from any.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>

#include <grpcpp/client_context.h>

#include "absl/status/status.h"
#include "experiments/cluster/local_cluster.h"
#include "proto/credentials.h"
#include "proto/experiment.pb.h"

namespace testbed {

class LabCluster {
 public:
  // `log_dir` holds the daemons' logs; the daemons inherit the job id and
  // token in `credentials` through the environment, which the caller sets.
  LabCluster(Credentials credentials, std::string log_dir);
  ~LabCluster();  // ends every daemon it started

  absl::Status Run(const proto::ExperimentSpec& spec,
                   const std::function<void(const proto::ResultRow&)>& on_row,
                   std::ostream& progress);

  // Ends the run in flight, and refuses every later one: the lab is closing,
  // and Ctrl-C should not wait for a run's timeout.
  void Cancel();

 private:
  absl::Status EnsureCluster(int workers, std::ostream& progress);

  Credentials credentials_;
  std::string log_dir_;
  std::unique_ptr<LocalCluster> cluster_;
  int cluster_workers_ = 0;
  std::mutex mu_;
  grpc::ClientContext* in_flight_ = nullptr;  // guarded by mu_
  bool cancelled_ = false;                    // guarded by mu_
};

}  // namespace testbed
