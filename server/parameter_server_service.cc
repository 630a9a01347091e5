#include "server/parameter_server_service.h"

#include "absl/strings/str_cat.h"
#include "proto/chunk_wire.h"
#include "proto/grpc_status.h"
#include "proto/lent_slices.h"

namespace testbed {

namespace {

// The methods' indices in the service, in the order parameter_server.proto
// declares them (the order the generated Service registers them in).
enum MethodIndex { kDeclare = 0, kPush = 1, kPull = 2, kPushPull = 3 };

// Keeps a decoded chunk's slices (the transport's memory) alive while the store
// stages them.
struct StagedSlices {
  std::vector<grpc::Slice> slices;
};

}  // namespace

ParameterServerService::ParameterServerService(ParameterStore& store, Credentials credentials,
                                               std::chrono::milliseconds pull_timeout,
                                               std::shared_ptr<CallLimiter> calls)
    : store_(store),
      credentials_(std::move(credentials)),
      pull_timeout_(pull_timeout),
      calls_(std::move(calls)) {
  using Self = ParameterServerService;
  using grpc::ByteBuffer;
  // Swaps the generated handlers of the payload-carrying methods for ones that
  // read and write raw messages; the method names and wire format stay.
  MarkMethodStreamed(kPush, new grpc::internal::ClientStreamingHandler<Self, ByteBuffer,
                                                                       proto::PushReply>(
                                [](Self* self, grpc::ServerContext* context,
                                   grpc::ServerReader<ByteBuffer>* reader,
                                   proto::PushReply* reply) {
                                  return self->Push(context, reader, reply);
                                },
                                this));
  // Pull is server-streaming on the wire, but MarkMethodStreamed registers
  // every method as bidirectional: gRPC then reads no request for the
  // handler, so a server-streaming handler would get none (and crashed the
  // daemon on any Pull). The handler reads its one request itself.
  MarkMethodStreamed(kPull, new grpc::internal::BidiStreamingHandler<Self, proto::PullRequest,
                                                                     ByteBuffer>(
                                [](Self* self, grpc::ServerContext* context,
                                   grpc::ServerReaderWriter<ByteBuffer, proto::PullRequest>*
                                       stream) { return self->Pull(context, stream); },
                                this));
  MarkMethodStreamed(kPushPull,
                     new grpc::internal::BidiStreamingHandler<Self, ByteBuffer, ByteBuffer>(
                         [](Self* self, grpc::ServerContext* context,
                            grpc::ServerReaderWriter<ByteBuffer, ByteBuffer>* stream) {
                           return self->PushPull(context, stream);
                         },
                         this));
}

absl::StatusOr<CallLimiter::Admission> ParameterServerService::AdmitCall(
    const grpc::ServerContext& context) {
  if (absl::Status st = FromGrpcStatus(CheckCredentials(credentials_, context)); !st.ok()) {
    return st;
  }
  return calls_->Admit();
}

grpc::Status ParameterServerService::Declare(grpc::ServerContext* context,
                                             const proto::DeclareRequest* request,
                                             proto::DeclareReply* reply) {
  absl::StatusOr<CallLimiter::Admission> call = AdmitCall(*context);
  if (!call.ok()) return ToGrpcStatus(call.status());
  absl::StatusOr<ParameterStore::Slice> slice =
      store_.Declare(request->tensor(), static_cast<int>(request->shards()),
                     static_cast<int>(request->shard()));
  if (!slice.ok()) return ToGrpcStatus(slice.status());
  reply->set_offset(slice->offset);
  reply->set_count(slice->count);
  return grpc::Status::OK;
}

template <typename Reader>
absl::Status ParameterServerService::ReceivePush(Reader& reader, std::string* tensor,
                                                 std::uint64_t* step) {
  grpc::ByteBuffer message;
  proto::PushChunk chunk;  // the header fields; the payload stays in slices
  ChunkPayload payload;
  if (!reader.Read(&message)) return absl::InvalidArgumentError("an empty push");
  if (absl::Status st = DecodeChunk(message, kPushChunkPayloadField, &chunk, &payload); !st.ok()) {
    return st;
  }
  *tensor = chunk.tensor();
  *step = chunk.step();
  absl::StatusOr<std::unique_ptr<ParameterStore::PushSession>> session =
      store_.BeginPush(chunk.tensor(), chunk.worker(), chunk.step());
  if (!session.ok()) return session.status();
  std::vector<std::span<const std::byte>> pieces;
  while (true) {
    // The session stages the received slices themselves: no copy.
    auto staged = std::make_shared<StagedSlices>();
    staged->slices = std::move(payload.slices);
    pieces.clear();
    for (const grpc::Slice& s : staged->slices) {
      pieces.push_back(std::as_bytes(std::span(s.begin(), s.size())));
    }
    if (absl::Status st = (*session)->AddChunk(chunk.offset(), pieces, std::move(staged));
        !st.ok()) {
      return st;
    }
    if (!reader.Read(&message)) break;
    if (absl::Status st = DecodeChunk(message, kPushChunkPayloadField, &chunk, &payload);
        !st.ok()) {
      return st;
    }
  }
  return (*session)->Commit();
}

std::chrono::steady_clock::time_point ParameterServerService::PullDeadline(
    const grpc::ServerContext& context) const {
  const auto now_system = std::chrono::system_clock::now();
  const auto call_left = context.deadline() - now_system;
  const auto left = std::min<std::chrono::nanoseconds>(call_left, pull_timeout_);
  return std::chrono::steady_clock::now() + left;
}

grpc::Status ParameterServerService::Push(grpc::ServerContext* context,
                                          grpc::ServerReader<grpc::ByteBuffer>* reader,
                                          proto::PushReply* reply) {
  absl::StatusOr<CallLimiter::Admission> call = AdmitCall(*context);
  if (!call.ok()) return ToGrpcStatus(call.status());
  std::string tensor;
  std::uint64_t step = 0;
  if (absl::Status st = ReceivePush(*reader, &tensor, &step); !st.ok()) return ToGrpcStatus(st);
  reply->set_step(step);
  return grpc::Status::OK;
}

template <typename Writer>
absl::Status ParameterServerService::ServeStep(const grpc::ServerContext& context,
                                               const std::string& tensor, std::uint64_t step,
                                               Writer& writer) {
  return store_.Pull(
      tensor, step, PullDeadline(context),
      [&](std::int64_t offset, std::span<const std::byte> data,
          const std::shared_ptr<const void>& owner) {
        // The store's values themselves, held until sent: no copy.
        const grpc::Slice payload = SharedSlice(data, owner);
        proto::ValueChunk header;
        header.set_offset(offset);
        return writer.Write(
            EncodeChunk(header, kValueChunkPayloadField, std::span(&payload, 1)));
      },
      [&context] { return context.IsCancelled(); });
}

grpc::Status ParameterServerService::Pull(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<grpc::ByteBuffer, proto::PullRequest>* stream) {
  absl::StatusOr<CallLimiter::Admission> call = AdmitCall(*context);
  if (!call.ok()) return ToGrpcStatus(call.status());
  proto::PullRequest request;
  if (!stream->Read(&request)) {
    return ToGrpcStatus(absl::InvalidArgumentError("a pull without its request"));
  }
  return ToGrpcStatus(ServeStep(*context, request.tensor(), request.step(), *stream));
}

grpc::Status ParameterServerService::PushPull(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
  absl::StatusOr<CallLimiter::Admission> call = AdmitCall(*context);
  if (!call.ok()) return ToGrpcStatus(call.status());
  std::string tensor;
  std::uint64_t step = 0;
  if (absl::Status st = ReceivePush(*stream, &tensor, &step); !st.ok()) return ToGrpcStatus(st);
  return ToGrpcStatus(ServeStep(*context, tensor, step, *stream));
}

grpc::Status ParameterServerService::Forget(grpc::ServerContext* context,
                                            const proto::ForgetRequest* request,
                                            proto::ForgetReply*) {
  absl::StatusOr<CallLimiter::Admission> call = AdmitCall(*context);
  if (!call.ok()) return ToGrpcStatus(call.status());
  store_.Forget(request->tensor());
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::Stats(grpc::ServerContext* context,
                                           const proto::StatsRequest*, proto::StatsReply* reply) {
  absl::StatusOr<CallLimiter::Admission> call = AdmitCall(*context);
  if (!call.ok()) return ToGrpcStatus(call.status());
  reply->set_bytes_received(store_.bytes_received());
  reply->set_bytes_sent(store_.bytes_sent());
  return grpc::Status::OK;
}

}  // namespace testbed
