// A parameter-server shard served from this process on 127.0.0.1 (any free
// port): the store and its gRPC service behind a real socket, for tests that
// drive the PS client over the wire without starting daemons (`testbed
// train` starts testbed-server daemons instead).
//
// Thread-safety: Stop() may be called from any thread, more than once.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "proto/credentials.h"
#include "server/parameter_server_service.h"
#include "server/parameter_store.h"

namespace testbed {

class InProcessShard {
 public:
  // Pulls wait at most `pull_timeout` for their step. `port` 0 takes any free
  // one.
  static absl::StatusOr<std::unique_ptr<InProcessShard>> Start(
      const Credentials& credentials, std::chrono::milliseconds pull_timeout, int port = 0);
  ~InProcessShard() { Stop(); }

  const std::string& address() const { return address_; }  // "127.0.0.1:PORT"
  // Fails every waiting pull and stops serving: a worker that failed must not
  // leave the others waiting for its push.
  void Stop();

 private:
  InProcessShard() = default;
  ParameterStore store_;
  std::unique_ptr<ParameterServerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace testbed
