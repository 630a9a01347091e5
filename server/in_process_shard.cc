#include "server/in_process_shard.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"

namespace testbed {

absl::StatusOr<std::unique_ptr<InProcessShard>> InProcessShard::Start(
    const Credentials& credentials, std::chrono::milliseconds pull_timeout, int port) {
  auto shard = std::unique_ptr<InProcessShard>(new InProcessShard());
  shard->service_ =
      std::make_unique<ParameterServerService>(shard->store_, credentials, pull_timeout);
  grpc::ServerBuilder builder;
  const std::string listen = absl::StrCat("127.0.0.1:", port);
  port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(shard->service_.get());
  shard->server_ = builder.BuildAndStart();
  if (shard->server_ == nullptr || port == 0) {
    return absl::UnavailableError("cannot start a parameter-server shard on 127.0.0.1");
  }
  shard->address_ = absl::StrCat("127.0.0.1:", port);
  return shard;
}

void InProcessShard::Stop() {
  store_.Shutdown();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

}  // namespace testbed
