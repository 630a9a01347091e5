#include "server/parameter_server_service.h"

#include <algorithm>
#include <atomic>
#include <thread>

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
absl::StatusOr<ParameterServerService::ReceivedPush> ParameterServerService::BeginPush(
    Reader& reader) {
  ReceivedPush push;
  grpc::ByteBuffer message;
  if (!reader.Read(&message)) return absl::InvalidArgumentError("an empty push");
  if (absl::Status st = DecodeChunk(message, kPushChunkPayloadField, &push.chunk, &push.payload);
      !st.ok()) {
    return st;
  }
  push.tensor = push.chunk.tensor();
  push.step = push.chunk.step();
  push.worker = push.chunk.worker();
  absl::StatusOr<std::unique_ptr<ParameterStore::PushSession>> session =
      store_.BeginPush(push.chunk.tensor(), push.chunk.worker(), push.chunk.step());
  if (!session.ok()) return session.status();
  push.encoding = (*session)->push_encoding();
  push.session = *std::move(session);
  return push;
}

template <typename Reader>
absl::Status ParameterServerService::ReceiveChunks(Reader& reader, ReceivedPush& push) {
  grpc::ByteBuffer message;
  std::vector<std::span<const std::byte>> pieces;
  while (true) {
    if (push.encoding != proto::TensorSpec::DENSE) {
      // Halves widened, or pairs scattered, into the float32 the store takes,
      // chunk by chunk as they arrive: the store's memory for a push is what
      // a dense push takes, and nothing waits for the whole push. (A refusal
      // here drops the session, which fails the push as the store's own do.)
      const bool fp16 = push.encoding == proto::TensorSpec::FP16;
      const std::int64_t count = fp16 ? static_cast<std::int64_t>(push.payload.bytes / 2)
                                      : push.chunk.count();
      if (fp16 && push.payload.bytes % 2 != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", push.tensor, "': an FP16 chunk of ", push.payload.bytes,
                         " bytes is not whole halves"));
      }
      if (!fp16 && (count < 0 || count > kMaxSparseChunkElements)) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", push.tensor, "': a SPARSE chunk of ", count,
                         " elements (0 to ", kMaxSparseChunkElements, ")"));
      }
      auto dense = std::make_shared<std::vector<float>>(static_cast<std::size_t>(count));
      if (fp16) {
        WidenHalves(push.payload.slices, dense->data());
      } else if (absl::Status st = ScatterPairs(push.payload.slices, push.payload.bytes, *dense);
                 !st.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", push.tensor, "': ", st.message()));
      }
      const std::size_t wire = push.payload.bytes;
      push.payload.slices.clear();  // the received bytes are not needed any more
      const std::span<const std::byte> piece = std::as_bytes(std::span(*dense));
      if (absl::Status st =
              push.session->AddChunk(push.chunk.offset(), std::span(&piece, 1), std::move(dense));
          !st.ok()) {
        return st;
      }
      staged_beyond_wire_ += static_cast<std::int64_t>(piece.size()) -
                             static_cast<std::int64_t>(wire);
    } else {
      // The session stages the received slices themselves: no copy.
      auto staged = std::make_shared<StagedSlices>();
      staged->slices = std::move(push.payload.slices);
      pieces.clear();
      for (const grpc::Slice& s : staged->slices) {
        pieces.push_back(std::as_bytes(std::span(s.begin(), s.size())));
      }
      if (absl::Status st =
              push.session->AddChunk(push.chunk.offset(), pieces, std::move(staged));
          !st.ok()) {
        return st;
      }
    }
    if (!reader.Read(&message)) break;
    if (absl::Status st =
            DecodeChunk(message, kPushChunkPayloadField, &push.chunk, &push.payload);
        !st.ok()) {
      return st;
    }
  }
  return push.session->Commit();
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
  absl::StatusOr<ReceivedPush> push = BeginPush(*reader);
  if (!push.ok()) return ToGrpcStatus(push.status());
  if (absl::Status st = ReceiveChunks(*reader, *push); !st.ok()) return ToGrpcStatus(st);
  reply->set_step(push->step);
  return grpc::Status::OK;
}

template <typename Writer>
absl::Status ParameterServerService::ServeStep(const grpc::ServerContext& context,
                                               const std::string& tensor, std::uint64_t step,
                                               Writer& writer,
                                               const std::function<bool()>& stop,
                                               std::optional<std::uint32_t> puller) {
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
      [&context, &stop] { return context.IsCancelled() || (stop && stop()); }, puller);
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

// Full duplex: the push's chunks are read on a thread of its own while this
// one writes the step's values, each chunk as soon as every worker pushed it
// (gRPC's sync API allows one reader and one writer at once on a stream).
grpc::Status ParameterServerService::PushPull(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
  absl::StatusOr<CallLimiter::Admission> call = AdmitCall(*context);
  if (!call.ok()) return ToGrpcStatus(call.status());
  absl::StatusOr<ReceivedPush> push = BeginPush(*stream);
  if (!push.ok()) return ToGrpcStatus(push.status());
  absl::Status pushed;
  std::atomic<bool> push_failed{false};
  std::thread reader([&] {
    pushed = ReceiveChunks(*stream, *push);
    push->session.reset();  // a failed push fails (or leaves) the step now
    push_failed = !pushed.ok();
  });
  // A withdrawn push leaves its step unserved: the pull stops rather than
  // wait for it (within ParameterStore::kGoneCheck).
  const absl::Status served = ServeStep(
      *context, push->tensor, push->step, *stream, [&] { return push_failed.load(); },
      push->worker);
  // The reader ends when the client finishes its push (WritesDone) or the call
  // ends (deadline, cancellation).
  reader.join();
  return ToGrpcStatus(!pushed.ok() ? pushed : served);
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
  // The store counts what it staged; encoded pushes were staged decoded. The
  // difference is read first: the store counts a chunk before it changes.
  const std::int64_t beyond = staged_beyond_wire_.load();
  const auto staged = static_cast<std::int64_t>(store_.bytes_received());
  reply->set_bytes_received(static_cast<std::uint64_t>(std::max<std::int64_t>(0, staged - beyond)));
  reply->set_bytes_sent(store_.bytes_sent());
  return grpc::Status::OK;
}

}  // namespace testbed
