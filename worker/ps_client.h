// A worker's view of the sharded parameter server: declares a tensor on every
// shard, then runs synchronous steps - push the whole gradient, pull the whole
// result - through all shards in parallel, each shard's slice as a stream of
// chunks (gRPC's 4 MiB message cap never limits a tensor). Push and pull run
// at once on each shard's stream (full duplex): values of a chunk arrive as
// soon as every worker pushed it, while later chunks are still being pushed.
//
// Payload bytes are counted per shard, as pushed and as pulled.
//
// Thread-safety: one PsClient per worker, used from one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
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

  // Declares `tensor` on every shard and learns each shard's slice.
  absl::Status Declare(const proto::TensorSpec& tensor);

  // Pushes `gradient` (the whole tensor) for `step` and overwrites it, slice by
  // slice, with what the shards serve for that step. Shards run in parallel.
  // The push sends `gradient` itself, not a copy: this returns only once gRPC
  // holds no reference to it, whether the step succeeded or failed.
  absl::Status PushPull(const std::string& tensor, std::uint32_t worker, std::uint64_t step,
                        std::span<std::byte> gradient_then_result);

  // Frees the tensor on every shard (once every worker is done with it).
  absl::Status Forget(const std::string& tensor);

  const std::vector<ShardTraffic>& traffic() const { return traffic_; }
  void ResetTraffic();

  static constexpr std::size_t kChunkBytes = 1 << 20;

 private:
  struct Slice {
    std::int64_t offset = 0, count = 0;
  };
  // `status` of a call to `shard`, as an error naming the shard and its address.
  absl::Status ShardError(std::size_t shard, const grpc::Status& status) const;
  using PushStream = grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;
  // One shard's part of a step: its push written while its values are read.
  absl::Status ShardStep(int shard, const std::string& tensor, std::uint32_t worker,
                         std::uint64_t step, std::span<std::byte> data, LentSlices& lent);
  // Writes `slice` of `data` as chunks after `header` (tensor, worker, step),
  // then WritesDone; returns the payload bytes written.
  std::uint64_t WritePush(PushStream& stream, const proto::PushChunk& header, const Slice& slice,
                          std::span<std::byte> data, LentSlices& lent) const;
  // Reads the values of `slice` into `data` until the stream ends, counting
  // their bytes in `pulled`; an error if shard `shard` sent a bad chunk.
  absl::Status ReadValues(PushStream& stream, int shard, const Slice& slice,
                          std::span<std::byte> data, std::uint64_t* pulled) const;
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
  std::vector<Slice> slices_;  // of the last declared tensor
  std::size_t element_ = 4;
  std::vector<ShardTraffic> traffic_;
};

}  // namespace testbed
