// The coordinator: the control plane's one authority. Worker daemons attach
// and stay attached (one bidirectional stream each); a client submits an
// experiment; the coordinator picks N idle workers, gives them ranks, relays
// their UCX addresses, starts them together, and streams the aggregated rows
// back to the client as the per-rank results arrive.
//
// Failure: a worker whose stream breaks, whose heartbeats stop, or which
// reports a failure ends the experiment: the other workers get an Abort naming
// the lost rank, and the client's call fails with the same message. No wait
// here is unbounded.
//
// Thread-safety: gRPC calls the handlers from many threads; all shared state
// is guarded by mu_. Writes to one worker's stream are serialized by that
// worker's own mutex, so a slow worker never holds mu_.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "proto/control.grpc.pb.h"
#include "proto/credentials.h"

namespace testbed {

struct CoordinatorOptions {
  Credentials credentials;
  std::chrono::milliseconds heartbeat_interval{1000};  // asked of workers
  std::chrono::milliseconds heartbeat_timeout{10000};  // silence that means lost
  std::chrono::milliseconds handshake_timeout{30000};  // addresses, connections
};

// When the coordinator gives up on one row (an algorithm at a size) that
// started at `now`: every iteration, warm-up included, may take the spec's
// collective timeout, plus 30 s of slack. Saturates at the clock's last
// instant instead of overflowing: timeout x iterations can pass the ~292 years
// that steady_clock's nanoseconds hold (86400 s x 1000000 iterations does).
std::chrono::steady_clock::time_point RowDeadline(std::chrono::steady_clock::time_point now,
                                                  const proto::ExperimentSpec& spec);

class CoordinatorService final : public proto::Coordinator::Service {
 public:
  explicit CoordinatorService(CoordinatorOptions options);
  ~CoordinatorService() override;

  grpc::Status Attach(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<proto::CoordinatorMessage, proto::WorkerMessage>* stream) override;
  grpc::Status Submit(grpc::ServerContext* context, const proto::SubmitRequest* request,
                      grpc::ServerWriter<proto::SubmitEvent>* writer) override;
  grpc::Status Health(grpc::ServerContext* context, const proto::HealthRequest* request,
                      proto::HealthReply* reply) override;
  grpc::Status RegisterShard(grpc::ServerContext* context, const proto::ShardHello* request,
                             proto::ShardWelcome* reply) override;

  // Fails the running experiment and wakes every waiting handler; call before
  // shutting the gRPC server down.
  void Shutdown();

  // Where workers reach this server's own parameter-server shard (shard 0);
  // known only once the server listens.
  void SetOwnShardAddress(const std::string& address);

 private:
  struct WorkerSession;
  struct Experiment;

  // Routes one message from a worker into the running experiment.
  void Deliver(WorkerSession& worker, const proto::WorkerMessage& message);
  // Marks the experiment failed (first reason wins) and wakes its waiters.
  void FailLocked(Experiment& experiment, const std::string& reason);
  // Waits until `done` or the experiment fails; checks heartbeats meanwhile.
  // Returns the failure, or a timeout naming `what`.
  grpc::Status WaitLocked(std::unique_lock<std::mutex>& lock, Experiment& experiment,
                          std::chrono::steady_clock::time_point deadline, const std::string& what,
                          grpc::ServerContext* client, const std::function<bool()>& done);
  grpc::Status RunExperiment(std::unique_lock<std::mutex>& lock,
                             const std::shared_ptr<Experiment>& experiment,
                             grpc::ServerContext* client,
                             grpc::ServerWriter<proto::SubmitEvent>* writer);
  void SendToAll(const Experiment& experiment, const proto::CoordinatorMessage& message);

  const CoordinatorOptions options_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::uint32_t, std::shared_ptr<WorkerSession>> workers_;  // attached, by id
  std::shared_ptr<Experiment> running_;                              // at most one
  // The experiment that waits for workers before it runs; 0 when none. At most
  // one waits: a second would take the same workers once they come.
  std::uint64_t waiting_for_workers_ = 0;
  std::string own_shard_address_;
  std::vector<std::string> shards_;  // other servers' shard addresses, in joining order
  std::uint32_t next_worker_id_ = 0;
  std::uint64_t next_experiment_id_ = 1;
  bool shutting_down_ = false;
};

}  // namespace testbed
