// The coordinator's gRPC face: a thin layer over CoordinatorCore
// (server/coordinator_core.h), which holds the workers, the shards and the
// experiment's state machine. Worker daemons attach and stay attached (one
// bidirectional stream each); a client submits an experiment; the core picks N
// idle workers, gives them ranks, relays their UCX addresses, starts them
// together, and the Submit handler streams the aggregated rows back to the
// client as they come. This file only reads streams, calls the core, delivers
// what the core queued, and converts statuses (proto/grpc_status.h).
//
// Failure: a worker whose stream breaks, whose heartbeats stop, or which
// reports a failure ends the experiment: the other workers get an Abort naming
// the lost rank, and the client's call fails with the same message. No wait
// here is unbounded.
//
// Thread-safety: gRPC calls the handlers from many threads; the core and the
// sessions are guarded by mu_. Writes to one worker's stream are serialized by
// that worker's own mutex and made without mu_, so a slow worker never holds it.
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
#include "server/call_limiter.h"
#include "server/coordinator_core.h"

namespace testbed {

struct CoordinatorOptions {
  Credentials credentials;
  std::chrono::milliseconds heartbeat_interval{1000};  // asked of workers
  std::chrono::milliseconds heartbeat_timeout{10000};  // silence that means lost
  std::chrono::milliseconds handshake_timeout{30000};  // addresses, connections
  // The calls in progress, shared with the daemon's other services.
  std::shared_ptr<CallLimiter> calls = std::make_shared<CallLimiter>();
};

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

  // The job's token, then a place among the calls in progress, held by the
  // returned admission until the handler returns.
  absl::StatusOr<CallLimiter::Admission> AdmitCall(const grpc::ServerContext& context);

  // Delivers what the core queued for workers; call with mu_ held in `lock`,
  // which it releases while writing.
  void SendQueued(std::unique_lock<std::mutex>& lock);

  const CoordinatorOptions options_;
  std::mutex mu_;
  std::condition_variable changed_;  // the core changed
  CoordinatorCore core_;
  std::map<std::uint32_t, std::shared_ptr<WorkerSession>> sessions_;  // attached, by id
};

}  // namespace testbed
