#include "worker/ps_client.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <limits>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "allreduce/data_type.h"
#include "proto/chunk_wire.h"
#include "proto/grpc_status.h"
#include "proto/spec.h"

namespace testbed {

absl::Status PsClient::ShardError(std::size_t shard, const grpc::Status& status) const {
  return absl::Status(FromGrpcStatus(status).code(),
                      absl::StrCat("parameter server shard ", shard, " at ", addresses_[shard],
                                   ": ", status.error_message(),
                                   status.error_code() == grpc::StatusCode::UNAVAILABLE
                                       ? absl::StrCat(" (", TlsHint(tls_), ")")
                                       : ""));
}

PsClient::PsClient(std::vector<std::string> shard_addresses, Credentials credentials,
                   std::chrono::milliseconds timeout, Tls tls)
    : addresses_(std::move(shard_addresses)),
      credentials_(std::move(credentials)),
      tls_(std::move(tls)),
      timeout_(timeout),
      traffic_(addresses_.size()),
      push_done_(addresses_.size()) {
  Connect();
}

void PsClient::Connect() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(16 << 20);
  // This client's connections are its own, so dropping its channels closes
  // them (and with them any writes still queued on lent slices).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // A shard that stops reading (stalled, not dead) fills the kernel's send
  // buffer: TCP then holds bytes of this worker's writes, and neither the
  // deadline nor a cancel can end a call whose data TCP still holds (gRPC's
  // proposal A18, "TCP User Timeout"). gRPC sets TCP_USER_TIMEOUT from the
  // keepalive timeout, so a connection whose data goes unacknowledged for
  // this client's timeout is closed and its writes fail. The keepalive time
  // is above the servers' default minimum ping interval (5 min): no ping of
  // ours is ever refused as too many.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10 * 60 * 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              static_cast<int>(std::min<std::chrono::milliseconds::rep>(
                  timeout_.count(), std::numeric_limits<int>::max())));
  push_pull_.clear();
  stubs_.clear();
  channels_.clear();
  const std::shared_ptr<grpc::ChannelCredentials> channel_credentials = ChannelCredentials(tls_);
  for (const std::string& address : addresses_) {
    channels_.push_back(grpc::CreateCustomChannel(address, channel_credentials, args));
    stubs_.push_back(proto::ParameterServer::NewStub(channels_.back()));
    push_pull_.emplace_back(push_pull_method_.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING,
                            channels_.back());
  }
}

PsClient::~PsClient() = default;

void PsClient::ResetTraffic() {
  traffic_.assign(addresses_.size(), ShardTraffic{});
  staged_bytes_ = 0;
}

std::uint64_t PsClient::staged_bytes() const { return staged_bytes_.load(); }

std::optional<grpc::Slice> PsClient::PushPayload(MutableBuffer chunk,
                                                 proto::TensorSpec::PushEncoding encoding,
                                                 LentSlices& lent) {
  const bool host = HostAccessible(chunk.memory);
  const bool encoded = encoding != proto::TensorSpec::DENSE;
  if (host && !encoded) return lent.Lend(chunk.data, chunk.size);
  if (chunk.empty()) return grpc::Slice();
  std::optional<StagingPool::Lease> lease;
  if (!host) {
    // Bounded: beyond it the bytes would only wait in gRPC's queue, and the
    // pool would grow with the tensor instead of staying a few chunks.
    lease = staging_pool_->AcquireWithin(chunk.size, chunk.memory,
                                         kStagedChunksPerShard * addresses_.size(),
                                         std::chrono::steady_clock::now() + timeout_);
    if (!lease) return std::nullopt;
    MemoryOpsFor(chunk.memory).Download(lease->host(), chunk);
    staged_bytes_ += chunk.size;
  }
  if (encoded) {
    // Encoded from host memory (the bounce buffer, which goes back to the
    // pool at once, for device memory) into a buffer gRPC owns until sent.
    const std::byte* from = host ? chunk.data : lease->host().data();
    const std::span<const float> values(reinterpret_cast<const float*>(from),
                                        chunk.size / sizeof(float));
    auto wire = std::make_shared<std::vector<std::byte>>();
    if (encoding == proto::TensorSpec::FP16) {
      wire->resize(values.size() * 2);
      EncodeHalves(values, wire->data());
    } else {
      EncodeNonZeros(values, wire.get());
    }
    const std::span<const std::byte> bytes(*wire);
    return SharedSlice(bytes, std::move(wire));
  }
  // gRPC drops the slice when the socket has its bytes: the buffer is then
  // back in the pool (which the owner keeps alive until then).
  struct Owner {
    std::shared_ptr<StagingPool> pool;  // declared first: outlives the lease
    StagingPool::Lease lease;
  };
  auto owner = std::make_shared<Owner>(Owner{staging_pool_, *std::move(lease)});
  const std::span<const std::byte> bytes = owner->lease.host();
  return SharedSlice(bytes, std::move(owner));
}

absl::Status PsClient::Declare(const proto::TensorSpec& tensor) {
  Layout layout;
  layout.slices.assign(addresses_.size(), Slice{});
  layout.element = ElementSize(DataTypeOf(tensor.dtype()));
  layout.encoding = tensor.push_encoding();  // the shards refuse encodings of non-float32 tensors
  for (std::size_t s = 0; s < stubs_.size(); ++s) {
    // The first call to a shard rides out connection attempts that fail
    // while it is still starting, or once under load, as the worker daemon
    // does for the coordinator; a call on a channel that has never connected
    // would fail at once with the first attempt's error. A shard that never
    // answers is then reported with gRPC's last connection error.
    const bool connected =
        channels_[s]->WaitForConnected(std::chrono::system_clock::now() + timeout_);
    grpc::ClientContext context;
    AttachCredentials(credentials_, context);
    context.set_deadline(std::chrono::system_clock::now() + timeout_);
    proto::DeclareRequest request;
    *request.mutable_tensor() = tensor;
    request.set_shards(stubs_.size());
    request.set_shard(s);
    proto::DeclareReply reply;
    const grpc::Status st = stubs_[s]->Declare(&context, request, &reply);
    if (!st.ok() && !connected) {
      return ShardError(s, grpc::Status(st.error_code(),
                                        absl::StrCat("no connection within ", timeout_.count(),
                                                     " ms: ", st.error_message())));
    }
    if (!st.ok()) return ShardError(s, st);
    layout.slices[s] = {reply.offset(), reply.count()};
  }
  tensors_[tensor.name()] = std::move(layout);
  return absl::OkStatus();
}

absl::Status PsClient::Forget(const std::string& tensor) {
  for (std::size_t s = 0; s < stubs_.size(); ++s) {
    grpc::ClientContext context;
    AttachCredentials(credentials_, context);
    context.set_deadline(std::chrono::system_clock::now() + timeout_);
    proto::ForgetRequest request;
    request.set_tensor(tensor);
    proto::ForgetReply reply;
    const grpc::Status st = stubs_[s]->Forget(&context, request, &reply);
    if (!st.ok()) return ShardError(s, st);
  }
  tensors_.erase(tensor);
  return absl::OkStatus();
}

std::uint64_t PsClient::WritePush(PushStream& stream, const proto::PushChunk& header,
                                  const Layout& layout, const Slice& slice, MutableBuffer data,
                                  LentSlices& lent) {
  proto::PushChunk chunk = header;
  const std::size_t element = layout.element;
  const std::size_t begin = static_cast<std::size_t>(slice.offset) * element;
  const std::size_t bytes = static_cast<std::size_t>(slice.count) * element;
  const std::size_t per_chunk = kChunkBytes / element * element;
  std::size_t at = 0;     // bytes of `data`'s slice pushed
  std::uint64_t sent = 0;  // payload bytes written: fewer than `at` when encoded
  do {  // an empty slice still sends one (empty) chunk: it names the step
    const std::size_t n = std::min(per_chunk, bytes - at);
    chunk.set_offset(slice.offset + static_cast<std::int64_t>(at / element));
    if (layout.encoding == proto::TensorSpec::SPARSE) {
      chunk.set_count(static_cast<std::int64_t>(n / element));  // pairs do not say it
    }
    // Host memory is lent, not copied: PushPull keeps `data` alive until
    // gRPC lets go. Device memory is copied down here, while gRPC still
    // sends the chunk before; an encoded chunk is encoded here.
    const std::optional<grpc::Slice> payload =
        PushPayload(data.subspan(begin + at, n), layout.encoding, lent);
    if (!payload.has_value() ||
        !stream.Write(EncodeChunk(chunk, kPushChunkPayloadField, std::span(&*payload, 1)))) {
      break;  // the server ended the call (Finish says why), or no buffer came back
    }
    at += n;
    sent += payload->size();
    if (at == n && at > 0) {
      chunk.clear_tensor();  // only the first chunk needs to name them
    }
  } while (at < bytes);
  stream.WritesDone();
  return sent;
}

// Full duplex: the push is written on a thread of its own while this one
// reads the values, which the shard sends chunk by chunk as soon as every
// worker has pushed that chunk; so this worker's link carries its gradient
// out and the values in at the same time.
absl::Status PsClient::ShardStep(int s, const std::string& tensor, const Layout& layout,
                                 std::uint32_t worker, std::uint64_t step, MutableBuffer data,
                                 LentSlices& lent) {
  const Slice slice = layout.slices[s];
  grpc::ClientContext context;
  AttachCredentials(credentials_, context);
  context.set_deadline(std::chrono::system_clock::now() + timeout_);
  // Raw messages in the PushChunk / ValueChunk wire format (proto/chunk_wire.h):
  // the generated stub would copy each payload twice more on each side.
  std::unique_ptr<PushStream> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channels_[s].get(), push_pull_[s], &context));
  proto::PushChunk header;
  header.set_tensor(tensor);
  header.set_worker(worker);
  header.set_step(step);
  std::uint64_t pushed = 0;
  std::promise<void> written;
  std::future<void> writer_done = written.get_future();
  std::thread writer([&] {
    pushed = WritePush(*stream, header, layout, slice, data, lent);
    push_done_[s] = std::chrono::steady_clock::now();
    written.set_value();
  });
  std::uint64_t pulled = 0;
  absl::Status read = ReadValues(*stream, s, layout.element, slice, data, &pulled);
  if (!read.ok()) context.TryCancel();  // ends the writer's writes too
  AwaitWriter(s, context, writer_done);
  writer.join();
  traffic_[s].bytes_pushed += pushed;
  traffic_[s].bytes_pulled += pulled;
  const grpc::Status st = stream->Finish();
  if (!read.ok()) return read;
  if (!st.ok()) return ShardError(s, st);
  const std::size_t bytes = static_cast<std::size_t>(slice.count) * layout.element;
  if (pulled != bytes) {
    return absl::DataLossError(absl::StrCat("parameter server shard ", s, " served ", pulled,
                                            " of ", bytes, " bytes"));
  }
  return absl::OkStatus();
}

void PsClient::AwaitWriter(int s, grpc::ClientContext& context, std::future<void>& done) const {
  // The reads have ended, so the call has: the shard sent its status, or the
  // deadline or a cancel ended it. A write still blocked then waits on TCP
  // for bytes a stalled shard does not read (the stalled-shard test in
  // tests/integration/parameter_server_test.cc hung so, under load, until
  // Connect set TCP_USER_TIMEOUT): it ends when TCP gives up on the
  // connection, within this client's timeout.
  constexpr auto kWriteGrace = std::chrono::seconds(1);
  if (done.wait_for(kWriteGrace) == std::future_status::ready) return;
  const auto cancel_wait = timeout_ + std::chrono::seconds(10);
  std::fprintf(stderr,
               "parameter server client: a push to shard %d still blocks %lld s after its call "
               "ended (the shard does not read); up to %lld s more for TCP to close it\n",
               s, static_cast<long long>(kWriteGrace.count()),
               static_cast<long long>(
                   std::chrono::duration_cast<std::chrono::seconds>(cancel_wait).count()));
  context.TryCancel();
  if (done.wait_for(cancel_wait) == std::future_status::ready) return;
  // Returning would free `data` and the stream under a writer still using them.
  std::fprintf(stderr,
               "fatal: a push to parameter server shard %d at %s still blocks %lld s after "
               "its call ended and was cancelled; stopping rather than hanging\n",
               s, addresses_[s].c_str(),
               static_cast<long long>(
                   std::chrono::duration_cast<std::chrono::seconds>(kWriteGrace + cancel_wait)
                       .count()));
  std::abort();
}

absl::Status PsClient::ReadValues(PushStream& stream, int s, std::size_t element,
                                  const Slice& slice, MutableBuffer data, std::uint64_t* pulled) {
  const std::size_t begin = static_cast<std::size_t>(slice.offset) * element;
  const std::size_t bytes = static_cast<std::size_t>(slice.count) * element;
  grpc::ByteBuffer message;
  proto::ValueChunk value;  // the header fields; the payload stays in slices
  ChunkPayload payload;
  while (stream.Read(&message)) {
    absl::Status decoded = DecodeChunk(message, kValueChunkPayloadField, &value, &payload);
    const std::size_t offset = static_cast<std::size_t>(value.offset()) * element;
    if (decoded.ok() && (value.offset() < 0 || offset < begin || payload.bytes > bytes ||
                         offset - begin > bytes - payload.bytes)) {
      decoded = absl::DataLossError("it sent values outside its slice");
    }
    if (!decoded.ok()) {
      return absl::DataLossError(absl::StrCat("parameter server shard ", s, " at ", addresses_[s],
                                              ": ", decoded.message()));
    }
    // The writer may still be pushing later chunks of `data`, and gRPC may
    // still hold lent slices over the bytes these values overwrite. Both are
    // safe: the shard serves the values of a chunk only once every worker,
    // this one included, has pushed that chunk, so this worker's socket has
    // sent those bytes and neither the writer nor gRPC reads them again (gRPC
    // copies into the kernel, or into TLS records, before they leave; it sends
    // from user memory without a copy only with TCP zero-copy, which is off).
    // The values of a chunk never cover bytes of a chunk not yet pushed.
    // Device memory: the same holds for the copy down of the chunk, made
    // before it was pushed; the values go up through a bounce buffer, in one
    // copy however many pieces gRPC delivered them in.
    const bool host = HostAccessible(data.memory);
    StagingPool::Lease lease;
    if (!host) lease = staging_pool_->Acquire(payload.bytes, data.memory);
    std::byte* to = host ? data.data + offset : lease.host().data();
    for (const grpc::Slice& piece : payload.slices) {
      std::memcpy(to, piece.begin(), piece.size());
      to += piece.size();
    }
    if (!host && payload.bytes > 0) {
      MemoryOpsFor(data.memory).Upload(data.subspan(offset, payload.bytes), lease.host());
      staged_bytes_ += payload.bytes;
    }
    *pulled += payload.bytes;
  }
  return absl::OkStatus();
}

absl::Status PsClient::PushPull(const std::string& tensor, std::uint32_t worker,
                                std::uint64_t step, MutableBuffer data) {
  const auto declared = tensors_.find(tensor);
  if (declared == tensors_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("tensor '", tensor, "' was not declared: Declare first"));
  }
  const Layout& layout = declared->second;
  LentSlices lent;
  std::vector<absl::Status> status(stubs_.size());
  std::vector<std::thread> threads;
  for (std::size_t s = 1; s < stubs_.size(); ++s) {
    threads.emplace_back(
        [&, s] { status[s] = ShardStep(s, tensor, layout, worker, step, data, lent); });
  }
  status[0] = ShardStep(0, tensor, layout, worker, step, data, lent);  // shard 0 on this thread
  for (std::thread& t : threads) t.join();
  AwaitLentSlices(lent);
  for (const absl::Status& st : status) {
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

std::chrono::steady_clock::time_point PsClient::last_push_done() const {
  return *std::max_element(push_done_.begin(), push_done_.end());
}

void PsClient::AwaitLentSlices(LentSlices& lent) {
  // After a completed step gRPC has let go already, or does within moments.
  constexpr auto kReturnWait = std::chrono::seconds(1);
  if (lent.WaitAllReturned(std::chrono::steady_clock::now() + kReturnWait)) return;
  // A call that failed against a stalled shard can leave writes queued on a
  // connection nobody reads: closing the connections ends them.
  std::fprintf(stderr,
               "parameter server client: gRPC still holds %zu slices of a pushed gradient "
               "%lld s after the step; closing the connections to the shards\n",
               lent.outstanding(), static_cast<long long>(kReturnWait.count()));
  Connect();
  constexpr auto kCloseWait = std::chrono::seconds(10);
  if (lent.WaitAllReturned(std::chrono::steady_clock::now() + kCloseWait)) return;
  // Returning would let the caller free memory gRPC may still read.
  std::fprintf(stderr,
               "fatal: gRPC still holds %zu slices of a pushed gradient %lld s after its "
               "connections were closed; stopping rather than freeing memory in use\n",
               lent.outstanding(), static_cast<long long>(kCloseWait.count()));
  std::abort();
}

}  // namespace testbed
