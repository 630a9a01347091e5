// The gRPC face of one parameter-server shard: a thin layer that checks the
// job's token, turns streams of chunks into ParameterStore calls, and turns
// the store's answers back into gRPC statuses.
//
// All N workers pull the same values of a step, so the first pull of a step
// builds the step's chunk messages once and the others send the same ones:
// one copy of the slice per step instead of one per worker.
//
// Push, Pull and PushPull carry the payload, so they do not go through
// generated protobuf code: their handlers read and write grpc::ByteBuffers in
// the messages' wire format (proto/chunk_wire.h). A pushed chunk is staged as
// the slices the transport received, a pulled one is sent as the step's
// slices: the payload is copied in user space only to sum it and once per step
// to serve it. Clients built from the .proto still talk to this service.
//
// Thread-safety: gRPC calls the handlers concurrently; the store is thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "proto/credentials.h"
#include "proto/parameter_server.grpc.pb.h"
#include "server/parameter_store.h"

namespace testbed {

class ParameterServerService final : public proto::ParameterServer::Service {
 public:
  // `store` must outlive the service. Pulls wait at most `pull_timeout` (or
  // the call's own deadline, if sooner) for their step.
  ParameterServerService(ParameterStore& store, Credentials credentials,
                         std::chrono::milliseconds pull_timeout = std::chrono::seconds(120));

  grpc::Status Declare(grpc::ServerContext* context, const proto::DeclareRequest* request,
                       proto::DeclareReply* reply) override;
  grpc::Status Stats(grpc::ServerContext* context, const proto::StatsRequest* request,
                     proto::StatsReply* reply) override;
  grpc::Status Forget(grpc::ServerContext* context, const proto::ForgetRequest* request,
                      proto::ForgetReply* reply) override;

  // Chunks of values are at most this large: well under gRPC's 4 MiB cap.
  static constexpr std::size_t kChunkBytes = 1 << 20;

 private:
  // The handlers of the payload-carrying methods, over raw messages.
  grpc::Status Push(grpc::ServerContext* context, grpc::ServerReader<grpc::ByteBuffer>* reader,
                    proto::PushReply* reply);
  grpc::Status Pull(grpc::ServerContext* context, const proto::PullRequest* request,
                    grpc::ServerWriter<grpc::ByteBuffer>* writer);
  grpc::Status PushPull(grpc::ServerContext* context,
                        grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream);

  template <typename Reader>
  absl::Status ReceivePush(Reader& reader, std::string* tensor, std::uint64_t* step);
  // Sends the values of `step` to `writer`, building them once per step.
  template <typename Writer>
  absl::Status ServeStep(const grpc::ServerContext& context, const std::string& tensor,
                         std::uint64_t step, Writer& writer);

  struct PulledStep {
    std::uint64_t step = 0;
    struct Chunk {
      grpc::ByteBuffer message;  // an encoded ValueChunk; writing it copies no payload
      std::size_t payload_bytes = 0;
    };
    std::vector<Chunk> chunks;
  };
  struct PullCache {
    std::mutex build_mu;  // one builder per tensor; the other pullers wait for it
    std::shared_ptr<const PulledStep> latest;  // guarded by cache_mu_
  };
  std::mutex cache_mu_;
  std::map<std::string, std::shared_ptr<PullCache>> cache_;  // by tensor; guarded by cache_mu_
  std::atomic<std::uint64_t> bytes_sent_{0};
  std::chrono::steady_clock::time_point PullDeadline(const grpc::ServerContext& context) const;

  ParameterStore& store_;
  const Credentials credentials_;
  const std::chrono::milliseconds pull_timeout_;
};

}  // namespace testbed
