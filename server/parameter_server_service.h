// The gRPC face of one parameter-server shard: a thin layer that checks the
// job's token, turns streams of chunks into ParameterStore calls, and turns
// the store's answers back into gRPC statuses.
//
// Push, Pull and PushPull carry the payload, so they do not go through
// generated protobuf code: their handlers read and write grpc::ByteBuffers in
// the messages' wire format (proto/chunk_wire.h). A pushed chunk is staged as
// the slices the transport received; a pulled chunk is sent as a slice of the
// store's values, which the store keeps unchanged while gRPC holds it. The
// payload is touched in user space only to sum it. Clients built from the
// .proto still talk to this service.
//
// Push encodings (TensorSpec.push_encoding): an FP16 tensor's pushes arrive
// as halves, a SPARSE one's as (index, value) pairs; each chunk is decoded to
// float32 as it arrives (widened, or scattered into zeros: one copy, the
// only one) and staged as such, so the store - which takes the dtype's
// elements only - sums the decoded gradients. Stats count the bytes that
// travelled, not the floats staged from them.
//
// Thread-safety: gRPC calls the handlers concurrently; the store is thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "proto/chunk_wire.h"
#include "proto/credentials.h"
#include "proto/parameter_server.grpc.pb.h"
#include "server/call_limiter.h"
#include "server/parameter_store.h"

namespace testbed {

class ParameterServerService final : public proto::ParameterServer::Service {
 public:
  // `store` must outlive the service. Pulls wait at most `pull_timeout` (or
  // the call's own deadline, if sooner) for their step. Every call takes a
  // place among `calls` (shared with the daemon's other services) while it runs.
  ParameterServerService(ParameterStore& store, Credentials credentials,
                         std::chrono::milliseconds pull_timeout = std::chrono::seconds(120),
                         std::shared_ptr<CallLimiter> calls = std::make_shared<CallLimiter>());

  grpc::Status Declare(grpc::ServerContext* context, const proto::DeclareRequest* request,
                       proto::DeclareReply* reply) override;
  grpc::Status Stats(grpc::ServerContext* context, const proto::StatsRequest* request,
                     proto::StatsReply* reply) override;
  grpc::Status Forget(grpc::ServerContext* context, const proto::ForgetRequest* request,
                      proto::ForgetReply* reply) override;

 private:
  // The handlers of the payload-carrying methods, over raw messages.
  grpc::Status Push(grpc::ServerContext* context, grpc::ServerReader<grpc::ByteBuffer>* reader,
                    proto::PushReply* reply);
  grpc::Status Pull(grpc::ServerContext* context,
                    grpc::ServerReaderWriter<grpc::ByteBuffer, proto::PullRequest>* stream);
  grpc::Status PushPull(grpc::ServerContext* context,
                        grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream);

  // A push under way: its session, and its first chunk, read but not staged.
  struct ReceivedPush {
    std::string tensor;
    std::uint64_t step = 0;
    std::uint32_t worker = 0;
    proto::TensorSpec::PushEncoding encoding = proto::TensorSpec::DENSE;
    std::unique_ptr<ParameterStore::PushSession> session;
    proto::PushChunk chunk;  // the header fields; the payload stays in slices
    ChunkPayload payload;
  };
  // Reads the first chunk, which names the tensor, worker and step, and
  // begins the push (the store refuses a wrong one before anything joins).
  template <typename Reader>
  absl::StatusOr<ReceivedPush> BeginPush(Reader& reader);
  // Stages the first chunk and every later one, then commits.
  template <typename Reader>
  absl::Status ReceiveChunks(Reader& reader, ReceivedPush& push);
  // Sends the values of `step` to `writer`, in the store's chunks (1 MiB by
  // default: well under gRPC's 4 MiB message cap), each once it is ready;
  // stops when the call is cancelled or `stop` says so. `puller`: the worker
  // that pulls, where the call names it (PushPull; the stale modes use it).
  template <typename Writer>
  absl::Status ServeStep(const grpc::ServerContext& context, const std::string& tensor,
                         std::uint64_t step, Writer& writer,
                         const std::function<bool()>& stop = {},
                         std::optional<std::uint32_t> puller = std::nullopt);

  // The job's token, then a place among the calls in progress, held by the
  // returned admission until the handler returns.
  absl::StatusOr<CallLimiter::Admission> AdmitCall(const grpc::ServerContext& context);

  std::chrono::steady_clock::time_point PullDeadline(const grpc::ServerContext& context) const;

  ParameterStore& store_;
  const Credentials credentials_;
  const std::chrono::milliseconds pull_timeout_;
  const std::shared_ptr<CallLimiter> calls_;

  // Bytes the store counted as received beyond those that travelled: the
  // float32 decoded from encoded pushes, less what travelled (negative for a
  // SPARSE chunk denser than half); Stats subtracts it.
  std::atomic<std::int64_t> staged_beyond_wire_{0};
};

}  // namespace testbed
