// The parameter server's core, with no gRPC in it: one shard's slices of the
// tensors, synchronous steps, and the optimizers.
//
// A step of a tensor completes when all N workers have pushed it. Each push
// keeps its chunks (moved in, not copied) until the push is complete and
// valid, and only then adds them in, so a refused push changes nothing. On completion the
// shard sums (or averages) the gradients and applies the optimizer to its
// slice: NONE serves the sum itself (exactly the all-reduce result), SGD,
// momentum and Adam serve the updated parameters (which start at zero). A pull
// of step t waits until step t is complete; the shard keeps only the latest
// step, which is enough for synchronous workers (each pulls step t before it
// pushes t+1, so step t+1 cannot complete under a pull of step t).
//
// Thread-safety: all methods are thread-safe. One PushSession belongs to one
// thread (one gRPC stream).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "allreduce/data_type.h"
#include "proto/parameter_server.pb.h"

namespace testbed {

class ParameterStore {
 public:
  struct Slice {
    std::int64_t offset = 0;  // in elements of the whole tensor
    std::int64_t count = 0;
  };

  ParameterStore() = default;
  ~ParameterStore();

 private:
  struct Tensor;

 public:
  // Creates this shard's slice of `tensor` (ChunkOf(count, shards, shard)).
  // The same declaration again is a no-op; a different one is refused.
  absl::StatusOr<Slice> Declare(const proto::TensorSpec& tensor, int shards, int shard);

  // One worker's push of one step, chunk by chunk, in ascending order.
  class PushSession {
   public:
    // Stages a chunk; offset in elements of the whole tensor. Refuses chunks
    // outside the slice or out of order; nothing is applied before Commit().
    // The string overload takes the bytes without copying them.
    absl::Status AddChunk(std::int64_t offset, std::string&& data);
    absl::Status AddChunk(std::int64_t offset, std::span<const std::byte> data);
    // A chunk in pieces, as a transport received it (an element may straddle
    // two pieces), staged without a copy: `owner` keeps the pieces' memory
    // alive until Commit() has added them in.
    absl::Status AddChunk(std::int64_t offset, std::span<const std::span<const std::byte>> pieces,
                          std::shared_ptr<const void> owner);
    // Adds the staged gradient in; the last worker's commit completes the step.
    absl::Status Commit();

   private:
    friend class ParameterStore;
    PushSession(ParameterStore& store, std::shared_ptr<Tensor> tensor, std::uint32_t worker,
                std::uint64_t step)
        : store_(store), tensor_(std::move(tensor)), worker_(worker), step_(step) {}
    ParameterStore& store_;
    std::shared_ptr<Tensor> tensor_;  // kept alive while the push runs
    std::uint32_t worker_;
    std::uint64_t step_;
    std::int64_t next_ = 0;  // elements of the slice staged so far
    std::vector<std::span<const std::byte>> pieces_;  // staged, in slice order
    std::vector<std::shared_ptr<const void>> owners_;  // keep pieces_ alive
  };

  // Refuses a push for a step that is complete or not yet open, a second push
  // by the same worker for a step, and unknown tensors or workers.
  absl::StatusOr<std::unique_ptr<PushSession>> BeginPush(const std::string& tensor,
                                                         std::uint32_t worker, std::uint64_t step);

  // Waits (until `deadline`) for step `step` to complete, then hands the
  // slice's values to `emit` in chunks of at most `chunk_bytes`.
  using EmitChunk = std::function<bool(std::int64_t offset, std::span<const std::byte> data)>;
  absl::Status Pull(const std::string& tensor, std::uint64_t step,
                    std::chrono::steady_clock::time_point deadline, std::size_t chunk_bytes,
                    const EmitChunk& emit);

  // Frees a tensor; pushes and pulls under way keep their own reference.
  void Forget(const std::string& tensor);

  // Fails every waiting and future pull; for shutdown.
  void Shutdown();

  std::uint64_t bytes_received() const { return bytes_received_; }
  std::uint64_t bytes_sent() const { return bytes_sent_; }

 private:
  std::shared_ptr<Tensor> Find(const std::string& name);

  std::mutex mu_;  // guards tensors_ and shutdown_
  std::map<std::string, std::shared_ptr<Tensor>> tensors_;
  bool shutdown_ = false;
  std::atomic<std::uint64_t> bytes_received_{0};
  std::atomic<std::uint64_t> bytes_sent_{0};
};

}  // namespace testbed
