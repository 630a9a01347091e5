#include "server/parameter_server_service.h"

#include "absl/strings/str_cat.h"
#include "proto/grpc_status.h"

namespace testbed {

ParameterServerService::ParameterServerService(ParameterStore& store, Credentials credentials,
                                               std::chrono::milliseconds pull_timeout)
    : store_(store), credentials_(std::move(credentials)), pull_timeout_(pull_timeout) {}

grpc::Status ParameterServerService::Declare(grpc::ServerContext* context,
                                             const proto::DeclareRequest* request,
                                             proto::DeclareReply* reply) {
  if (grpc::Status st = CheckCredentials(credentials_, *context); !st.ok()) return st;
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
  proto::PushChunk chunk;
  if (!reader.Read(&chunk)) return absl::InvalidArgumentError("an empty push");
  *tensor = chunk.tensor();
  *step = chunk.step();
  absl::StatusOr<std::unique_ptr<ParameterStore::PushSession>> session =
      store_.BeginPush(chunk.tensor(), chunk.worker(), chunk.step());
  if (!session.ok()) return session.status();
  do {
    const std::string& data = chunk.data();
    absl::Status st = (*session)->AddChunk(
        chunk.offset(), std::span(reinterpret_cast<const std::byte*>(data.data()), data.size()));
    if (!st.ok()) return st;
  } while (reader.Read(&chunk));
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
                                          grpc::ServerReader<proto::PushChunk>* reader,
                                          proto::PushReply* reply) {
  if (grpc::Status st = CheckCredentials(credentials_, *context); !st.ok()) return st;
  std::string tensor;
  std::uint64_t step = 0;
  if (absl::Status st = ReceivePush(*reader, &tensor, &step); !st.ok()) return ToGrpcStatus(st);
  reply->set_step(step);
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::Pull(grpc::ServerContext* context,
                                          const proto::PullRequest* request,
                                          grpc::ServerWriter<proto::ValueChunk>* writer) {
  if (grpc::Status st = CheckCredentials(credentials_, *context); !st.ok()) return st;
  proto::ValueChunk chunk;
  return ToGrpcStatus(store_.Pull(
      request->tensor(), request->step(), PullDeadline(*context), kChunkBytes,
      [&](std::int64_t offset, std::span<const std::byte> data) {
        chunk.set_offset(offset);
        chunk.set_data(reinterpret_cast<const char*>(data.data()), data.size());
        return writer->Write(chunk);
      }));
}

grpc::Status ParameterServerService::PushPull(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<proto::ValueChunk, proto::PushChunk>* stream) {
  if (grpc::Status st = CheckCredentials(credentials_, *context); !st.ok()) return st;
  std::string tensor;
  std::uint64_t step = 0;
  if (absl::Status st = ReceivePush(*stream, &tensor, &step); !st.ok()) return ToGrpcStatus(st);
  proto::ValueChunk chunk;
  return ToGrpcStatus(store_.Pull(tensor, step, PullDeadline(*context), kChunkBytes,
                                  [&](std::int64_t offset, std::span<const std::byte> data) {
                                    chunk.set_offset(offset);
                                    chunk.set_data(reinterpret_cast<const char*>(data.data()),
                                                   data.size());
                                    return stream->Write(chunk);
                                  }));
}

grpc::Status ParameterServerService::Stats(grpc::ServerContext* context,
                                           const proto::StatsRequest*, proto::StatsReply* reply) {
  if (grpc::Status st = CheckCredentials(credentials_, *context); !st.ok()) return st;
  reply->set_bytes_received(store_.bytes_received());
  reply->set_bytes_sent(store_.bytes_sent());
  return grpc::Status::OK;
}

}  // namespace testbed
