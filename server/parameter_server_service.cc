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
    // The chunk's bytes move into the session: no copy.
    absl::Status st = (*session)->AddChunk(chunk.offset(), std::move(*chunk.mutable_data()));
    if (!st.ok()) return st;
    chunk.clear_data();
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

template <typename Writer>
absl::Status ParameterServerService::ServeStep(const grpc::ServerContext& context,
                                               const std::string& tensor, std::uint64_t step,
                                               Writer& writer) {
  std::shared_ptr<PullCache> cache;
  {
    std::lock_guard lock(cache_mu_);
    std::shared_ptr<PullCache>& slot = cache_[tensor];
    if (!slot) slot = std::make_shared<PullCache>();
    cache = slot;
  }
  std::shared_ptr<const PulledStep> values;
  {
    std::lock_guard build(cache->build_mu);
    {
      std::lock_guard lock(cache_mu_);
      if (cache->latest && cache->latest->step == step) values = cache->latest;
    }
    if (!values) {
      auto built = std::make_shared<PulledStep>();
      built->step = step;
      absl::Status st = store_.Pull(tensor, step, PullDeadline(context), kChunkBytes,
                                    [&](std::int64_t offset, std::span<const std::byte> data) {
                                      proto::ValueChunk& chunk = built->chunks.emplace_back();
                                      chunk.set_offset(offset);
                                      chunk.set_data(reinterpret_cast<const char*>(data.data()),
                                                     data.size());
                                      return true;
                                    });
      if (!st.ok()) return st;
      std::lock_guard lock(cache_mu_);
      cache->latest = built;
      values = built;
    }
  }
  for (const proto::ValueChunk& chunk : values->chunks) {
    if (!writer.Write(chunk)) return absl::CancelledError("the puller went away");
    bytes_sent_ += chunk.data().size();
  }
  return absl::OkStatus();
}

grpc::Status ParameterServerService::Pull(grpc::ServerContext* context,
                                          const proto::PullRequest* request,
                                          grpc::ServerWriter<proto::ValueChunk>* writer) {
  if (grpc::Status st = CheckCredentials(credentials_, *context); !st.ok()) return st;
  return ToGrpcStatus(ServeStep(*context, request->tensor(), request->step(), *writer));
}

grpc::Status ParameterServerService::PushPull(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<proto::ValueChunk, proto::PushChunk>* stream) {
  if (grpc::Status st = CheckCredentials(credentials_, *context); !st.ok()) return st;
  std::string tensor;
  std::uint64_t step = 0;
  if (absl::Status st = ReceivePush(*stream, &tensor, &step); !st.ok()) return ToGrpcStatus(st);
  return ToGrpcStatus(ServeStep(*context, tensor, step, *stream));
}

grpc::Status ParameterServerService::Forget(grpc::ServerContext* context,
                                            const proto::ForgetRequest* request,
                                            proto::ForgetReply*) {
  if (grpc::Status st = CheckCredentials(credentials_, *context); !st.ok()) return st;
  store_.Forget(request->tensor());
  std::lock_guard lock(cache_mu_);
  cache_.erase(request->tensor());
  return grpc::Status::OK;
}

grpc::Status ParameterServerService::Stats(grpc::ServerContext* context,
                                           const proto::StatsRequest*, proto::StatsReply* reply) {
  if (grpc::Status st = CheckCredentials(credentials_, *context); !st.ok()) return st;
  reply->set_bytes_received(store_.bytes_received());
  reply->set_bytes_sent(bytes_sent_);
  return grpc::Status::OK;
}

}  // namespace testbed
