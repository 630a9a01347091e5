// A worker's view of the sharded parameter server: declares a tensor on every
// shard, then runs synchronous steps - push the whole gradient, pull the whole
// result - through all shards in parallel, each shard's slice as a stream of
// chunks (gRPC's 4 MiB message cap never limits a tensor). Push and pull run
// at once on each shard's stream (full duplex): values of a chunk arrive as
// soon as every worker pushed it, while later chunks are still being pushed.
//
// Payload bytes are counted per shard, as pushed and as pulled: the bytes
// that travelled.
//
// Push encodings (TensorSpec.push_encoding, as declared): FP16 pushes each
// chunk of the float32 gradient as IEEE halves (proto/chunk_wire.h), half
// the bytes; SPARSE pushes its non-zero elements as (index, value) pairs, 8
// bytes each (what top-k leaves). The shards decode them back, and the
// values pulled are float32 as ever. A chunk is the same elements either way
// (kChunkBytes of float32, the store's chunk), so the shard's per-chunk
// pipelining is unchanged. The encoding is a copy, made chunk by chunk while
// gRPC sends the one before (at most a whole slice's worth if gRPC holds them
// all); device memory is copied down into a bounce buffer first, and encoded
// from there.
//
// The tensor may live in memory host code cannot touch (cuda, fake-device):
// gRPC is host-only, so it is then staged chunk by chunk through bounce
// buffers of a small pool that is reused from step to step (StagingPool:
// pinned for cuda). The writer copies chunk c+1 down while gRPC sends chunk
// c; each pulled chunk is copied up as soon as it arrives. Host memory is
// lent to gRPC as it is, without a copy.
//
// Thread-safety: one PsClient per worker, used from one thread at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "allreduce/memory.h"
#include "allreduce/transport/staging_pool.h"
#include "proto/credentials.h"
#include "proto/parameter_server.grpc.pb.h"
#include "proto/lent_slices.h"
#include "proto/tls.h"

namespace testbed {

struct ShardTraffic {
  std::uint64_t bytes_pushed = 0;
  std::uint64_t bytes_pulled = 0;
};

class PsClient {
 public:
  // One address per shard, in shard order. Calls fail after `timeout`.
  // Channels use TLS when `tls` is on (proto/tls.h).
  PsClient(std::vector<std::string> shard_addresses, Credentials credentials,
           std::chrono::milliseconds timeout, Tls tls = {});
  ~PsClient();

  // Declares `tensor` on every shard and learns each shard's slice. Any
  // number of tensors may be declared (a training run's buckets are one
  // each); PushPull and Forget name the one they mean.
  absl::Status Declare(const proto::TensorSpec& tensor);

  // Pushes `gradient` (the whole tensor) for `step` and overwrites it, slice by
  // slice, with what the shards serve for that step. Shards run in parallel.
  // Host memory (a plain byte span) is pushed itself, not a copy: this
  // returns only once gRPC holds no reference to it, whether the step
  // succeeded or failed. Other memory is staged per chunk (see above).
  absl::Status PushPull(const std::string& tensor, std::uint32_t worker, std::uint64_t step,
                        MutableBuffer gradient_then_result);

  // Frees the tensor on every shard (once every worker is done with it).
  absl::Status Forget(const std::string& tensor);

  const std::vector<ShardTraffic>& traffic() const { return traffic_; }
  // When the last PushPull's push was written, every shard's: its last chunk
  // handed to gRPC (a timeline's push phase ends there, RankResult.round_end_us).
  std::chrono::steady_clock::time_point last_push_done() const;
  // Also zeroes staged_bytes().
  void ResetTraffic();

  // Bytes of a staged tensor copied down (pushed) plus up (pulled) since
  // construction or the last ResetTraffic(): the payload, each byte once.
  std::uint64_t staged_bytes() const;
  // The bounce buffers' pool, for how many it allocated.
  StagingPool::Stats staging_stats() const { return staging_pool_->stats(); }

  static constexpr std::size_t kChunkBytes = 1 << 20;
  // Staged chunks of one shard that gRPC may hold at once: the writer waits
  // for one to come back beyond that, so the pool stays this small.
  static constexpr std::size_t kStagedChunksPerShard = 4;

 private:
  struct Slice {
    std::int64_t offset = 0, count = 0;
  };
  // What Declare learnt of a tensor: its slice on each shard, its element
  // size and how its pushes are encoded.
  struct Layout {
    std::vector<Slice> slices;  // by shard
    std::size_t element = 4;
    proto::TensorSpec::PushEncoding encoding = proto::TensorSpec::DENSE;
  };
  // `status` of a call to `shard`, as an error naming the shard and its address.
  absl::Status ShardError(std::size_t shard, const grpc::Status& status) const;
  using PushStream = grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;
  // One shard's part of a step: its push written while its values are read.
  absl::Status ShardStep(int shard, const std::string& tensor, const Layout& layout,
                         std::uint32_t worker, std::uint64_t step, MutableBuffer data,
                         LentSlices& lent);
  // Writes `slice` of `data` as chunks after `header` (tensor, worker, step),
  // then WritesDone; returns the payload bytes written.
  std::uint64_t WritePush(PushStream& stream, const proto::PushChunk& header,
                          const Layout& layout, const Slice& slice, MutableBuffer data,
                          LentSlices& lent);
  // Waits for the writer of shard `shard`'s step (`done`) once its reads have
  // ended, cancelling the call if it still writes; stops the process if even
  // that does not end it.
  void AwaitWriter(int shard, grpc::ClientContext& context, std::future<void>& done) const;
  // Reads the values of `slice` into `data` until the stream ends, counting
  // their bytes in `pulled`; an error if shard `shard` sent a bad chunk.
  absl::Status ReadValues(PushStream& stream, int shard, std::size_t element, const Slice& slice,
                          MutableBuffer data, std::uint64_t* pulled);
  // The payload of one pushed chunk: `chunk` lent as it is when it is host
  // memory, else copied down into a bounce buffer that goes back to the pool
  // when gRPC lets go of it. Empty (nullopt) if no bounce buffer came back
  // before the call's deadline.
  // Encoded (FP16, SPARSE): the chunk's encoding, in memory of its own.
  std::optional<grpc::Slice> PushPayload(MutableBuffer chunk,
                                         proto::TensorSpec::PushEncoding encoding,
                                         LentSlices& lent);
  // (Re)opens one channel per shard; dropping the old ones closes their connections.
  void Connect();
  // Returns once gRPC holds none of `lent`, closing the connections if it
  // keeps them; stops the process if even that does not free them.
  void AwaitLentSlices(LentSlices& lent);

  std::vector<std::string> addresses_;
  Credentials credentials_;
  Tls tls_;
  std::chrono::milliseconds timeout_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;  // by shard
  std::vector<std::unique_ptr<proto::ParameterServer::Stub>> stubs_;  // on channels_
  // PushPull, which PsClient calls with raw messages: its full name, and the
  // method as registered on each shard's channel.
  const std::string push_pull_method_ =
      std::string("/") + proto::ParameterServer::service_full_name() + "/PushPull";
  std::vector<grpc::internal::RpcMethod> push_pull_;  // by shard
  std::map<std::string, Layout> tensors_;  // declared, by name
  std::vector<ShardTraffic> traffic_;
  // By shard: when its writer of the last step ended. Each writer sets its
  // own; PushPull joins them before anyone reads.
  std::vector<std::chrono::steady_clock::time_point> push_done_;
  // Shared with the slices gRPC holds, which may outlive a step.
  std::shared_ptr<StagingPool> staging_pool_ = std::make_shared<StagingPool>();
  std::atomic<std::uint64_t> staged_bytes_{0};  // shard threads add to it
};

}  // namespace testbed
