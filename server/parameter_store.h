// The parameter server's core, with no gRPC in it: one shard's slices of the
// tensors, synchronous (or stale: see "Stale modes" below) steps, and the
// optimizers.
//
// A step of a tensor completes when all N workers have pushed it. The shard
// sums (or averages) the gradients and applies the optimizer to its slice:
// NONE serves the sum itself (exactly the all-reduce result), SGD, momentum
// and Adam serve the updated parameters (which start at zero). Each optimizer
// is a rule of its own (common/optimizer.h), one instance per tensor slice,
// applied a chunk at a time.
//
// Full duplex, per chunk: a push joins its step at BeginPush (which refuses,
// before anything joins, a push for a step that is complete or not open, a
// second push by the same worker, and unknown tensors or workers), and each
// chunk it stages (moved in, not copied) joins at once. Once all N workers
// have joined a step it is served, and chunk c of its values can be worked out
// as soon as all N have staged chunk c, long before the last push ends; so a
// worker pulls chunk c while it still pushes chunk c+1, and its link carries
// both directions at once (BytePS's argument). Chunks are the store's chunk
// size (Options::chunk_bytes); a push may stage any pieces, in slice order.
// A push is complete once its chunks cover the slice, and the step once every
// push is: then every chunk is ready, and its pullers may push the next step.
//
// Each chunk is worked out once, by whichever pull first needs it: its N
// gradients are summed in one pass, in worker order, so results are
// bit-identical whatever the arrival order or chunking. Pulls get the values
// themselves, with a reference that keeps their memory unchanged until
// released.
//
// A push that fails half-way (a chunk outside the slice or out of order, too
// few elements at Commit, or a session dropped before Commit) is withdrawn
// if its step is not served yet: nothing of it was used, and the worker may
// push again. Once the step is served, chunks holding its gradient may have
// gone out, so the step fails: its pulls (waiting or future) and pushes get
// ABORTED naming the worker, never partial sums or a hang; the tensor must be
// forgotten and declared again to go on.
//
// A pull of step t waits until step t is served, then for each chunk in turn;
// the shard keeps only the latest step, which is enough for synchronous
// workers (each pulls step t before it pushes t+1, so step t+1 is not served
// until every worker finished pulling step t; a pull overtaken by the next
// step fails). A step served while the previous one is not fully worked out
// (a client that pushes without pulling) finishes the previous one first.
//
// Stale modes (TensorSpec.consistency; the above is SYNCHRONOUS, the
// default, and nothing of it changes with them). BOUNDED_STALENESS with
// staleness k is the stale synchronous parallel model of Ho et al., "More
// Effective Distributed ML via a Stale Synchronous Parallel Parameter Server"
// (NIPS 2013); ASYNCHRONOUS is the same with k unbounded. The rules:
//  - Clocks. Worker w's clock c_w is the last step whose push it completed
//    (0 before its first). Each worker pushes its steps in order, one at a
//    time: BeginPush refuses step s unless s = c_w + 1 and no push of w is
//    under way. Pushes never wait for other workers.
//  - Updates. A push is applied on its own once its chunks cover the slice
//    (at its last chunk, before Commit returns; its chunks are staged until
//    then, so nothing of a push that breaks off was ever applied): the
//    gradient, divided by N where the optimizer averages (so N pushes of one
//    step move SGD's parameters as synchronous averaging does: -lr/N times
//    the sum; momentum and Adam see N small steps instead of one, and Adam's
//    bias correction counts pushes), goes through the optimizer, and c_w
//    becomes s. Pushes are applied one at a time, in the order they complete;
//    NONE (a step's sum, which only synchronous steps have) and int32 tensors
//    are refused at Declare.
//  - Reads. A pull of step t returns the values current when its rule first
//    holds, all of them from one version (the applied pushes so far, never
//    part of one). The rule: min over w of c_w >= t - k (every update of
//    steps <= t - k is in the values; newer ones may be, as SSP allows), and,
//    where the pull names its puller p (PushPull does), c_p >= t (a worker
//    reads its own writes; PsClient also relies on it, overwriting its
//    pushed gradient with the values it pulls). ASYNCHRONOUS (k infinite)
//    waits only for the puller's own push. So a worker that pulled step t,
//    and now computes step t + 1, is at most k steps ahead of the slowest,
//    which computes step min c_w + 1 >= t - k + 1; k = 0 waits like BSP, but
//    applies pushes one at a time (and a pull may see pushes of step t + 1
//    that faster workers made after it could return).
//  - Overlap. A stale pull sends one version, so PushPull's pull starts once
//    the puller's own push is applied: the push's and the pull's bytes do not
//    overlap in time as sync mode's chunks do (one worker's pull still
//    overlaps the others' pushes).
//  - Determinism. Values depend on the order pushes arrive in (the optimizer
//    runs per push, floating-point sums are not associative, and which pushes
//    a pull sees depends on timing): stale modes are not bit-reproducible
//    across runs, unlike sync mode. (SGD on small integer-valued data with
//    lr/N a power of two is exact whatever the order: the tests use that.)
//  - Failure. A push that breaks off (a bad chunk, a short Commit, a session
//    dropped before it covered the slice) fails the tensor: every pull
//    (waiting or future) and push gets ABORTED naming the worker and its
//    step, so no worker waits for a dead one's clock; forget and declare the
//    tensor again to go on. A worker that simply stops pushing holds the
//    others' pulls until their deadline, whose error names the workers behind.
//  - Memory: the values, a spare buffer (more while pulls still send older
//    versions), the optimizer's state, and each worker's push under way;
//    within the same limits below.
//
// A shard holds at most a stated number of bytes per tensor slice and in all
// (Options; testbed-server --max-tensor-bytes, --max-total-tensor-bytes), by
// default half the machine's memory, and a stated number of tensors
// (--max-tensors): a declaration beyond any of them is refused by name,
// before anything is allocated.
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
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "allreduce/data_type.h"
#include "proto/parameter_server.pb.h"

namespace testbed {

// Half of this machine's physical memory (8 GiB where it cannot be read): the
// default limit on a shard's tensor bytes, per tensor and in all.
std::int64_t DefaultMaxTensorBytes();

class ParameterStore {
 public:
  struct Slice {
    std::int64_t offset = 0;  // in elements of the whole tensor
    std::int64_t count = 0;
  };

  // Values are worked out and pulled in chunks of this many bytes (whole
  // elements, at least one).
  static constexpr std::size_t kDefaultChunkBytes = 1 << 20;

  struct Options {
    std::size_t chunk_bytes = kDefaultChunkBytes;
    // The largest slice of one tensor this shard holds, in bytes of its
    // elements. The shard's memory for it is a few times that: the served
    // values, a spare buffer, the previous values and the optimizer's state
    // (doubles) where there is an optimizer, and the N pushes of a step.
    std::int64_t max_tensor_bytes = DefaultMaxTensorBytes();
    // The most bytes of all declared slices together.
    std::int64_t max_total_bytes = DefaultMaxTensorBytes();
    // The most tensors declared at once: each costs bookkeeping beyond its
    // bytes, so a job that declares a tensor per step (and never forgets one)
    // is refused rather than left to grow the daemon without end.
    std::int64_t max_tensors = kDefaultMaxTensors;
  };
  static constexpr std::int64_t kDefaultMaxTensors = 65536;
  explicit ParameterStore(std::size_t chunk_bytes = kDefaultChunkBytes)
      : ParameterStore(Options{.chunk_bytes = chunk_bytes}) {}
  explicit ParameterStore(const Options& options)
      : chunk_bytes_(options.chunk_bytes),
        max_tensor_bytes_(options.max_tensor_bytes),
        max_total_bytes_(options.max_total_bytes),
        max_tensors_(options.max_tensors) {}
  ~ParameterStore();

 private:
  struct Tensor;

 public:
  // Creates this shard's slice of `tensor` (ChunkOf(count, shards, shard)).
  // The same declaration again is a no-op; a different one is refused. A
  // slice over the limits, or a tensor past the most tensors, is
  // RESOURCE_EXHAUSTED; a negative count, one whose
  // bytes overflow 64 bits, or an unknown optimizer, INVALID_ARGUMENT.
  absl::StatusOr<Slice> Declare(const proto::TensorSpec& tensor, int shards, int shard);

  // One worker's push of one step, chunk by chunk, in ascending order.
  class PushSession {
   public:
    // A session dropped before Commit fails its push (see the file comment).
    ~PushSession();
    PushSession(const PushSession&) = delete;
    PushSession& operator=(const PushSession&) = delete;

    // Stages a chunk; offset in elements of the whole tensor. A chunk outside
    // the slice or out of order fails the push. A staged chunk joins the step
    // at once: once every worker staged a store chunk, pulls may get it.
    // The string overload takes the bytes without copying them.
    absl::Status AddChunk(std::int64_t offset, std::string&& data);
    absl::Status AddChunk(std::int64_t offset, std::span<const std::byte> data);
    // A chunk in pieces, as a transport received it (an element may straddle
    // two pieces), staged without a copy: `owner` keeps the pieces' memory
    // alive until the step's values no longer need them.
    absl::Status AddChunk(std::int64_t offset, std::span<const std::span<const std::byte>> pieces,
                          std::shared_ptr<const void> owner);
    // Ends the push, which must have covered the slice (else it fails). A
    // push counts as soon as its chunks cover the slice, and the last one
    // completes the step: a worker that pulled every chunk of a step may push
    // the next at once, even before the others' Commit calls.
    absl::Status Commit();

    // How the tensor's pushes travel, as declared (the service decodes them
    // to the dtype's elements before AddChunk).
    proto::TensorSpec::PushEncoding push_encoding() const;

   private:
    friend class ParameterStore;
    PushSession(ParameterStore& store, std::shared_ptr<Tensor> tensor, std::uint32_t worker,
                std::uint64_t step)
        : store_(store), tensor_(std::move(tensor)), worker_(worker), step_(step) {}
    // Withdraws the push, or fails its step, because of `why`.
    void Fail(const absl::Status& why);

    ParameterStore& store_;
    std::shared_ptr<Tensor> tensor_;  // kept alive while the push runs
    std::uint32_t worker_;
    std::uint64_t step_;
    std::int64_t next_ = 0;  // elements of the slice staged so far
    bool finished_ = false;  // committed, withdrawn or failed
  };

  // Refuses a push for a step that is complete or not yet open, a second push
  // by the same worker for a step, and unknown tensors or workers.
  absl::StatusOr<std::unique_ptr<PushSession>> BeginPush(const std::string& tensor,
                                                         std::uint32_t worker, std::uint64_t step);

  // Waits (until `deadline`, or until `gone` says the puller went away: it is
  // asked every kGoneCheck) for step `step` to be served, then hands the
  // slice's values to `emit` in order, in chunks of the store's chunk size,
  // each as soon as every worker has pushed it. In the stale modes it waits
  // for the consistency rule instead (the file comment), `puller` being the
  // worker that pulls, where known (sync mode does not use it).
  // `data` stays valid and unchanged while a copy of `owner` is held, so a
  // transport may send it without copying; `emit` returns false to stop.
  using EmitChunk = std::function<bool(std::int64_t offset, std::span<const std::byte> data,
                                       const std::shared_ptr<const void>& owner)>;
  absl::Status Pull(const std::string& tensor, std::uint64_t step,
                    std::chrono::steady_clock::time_point deadline, const EmitChunk& emit,
                    const std::function<bool()>& gone = {},
                    std::optional<std::uint32_t> puller = std::nullopt);
  // A cancelled pull's wait ends within this: its thread (and its place among
  // the server's calls in progress) comes back without waiting for the deadline.
  static constexpr std::chrono::milliseconds kGoneCheck{100};

  // Frees a tensor; pushes and pulls under way keep their own reference.
  void Forget(const std::string& tensor);

  // Fails every waiting and future pull; for shutdown.
  void Shutdown();

  std::uint64_t bytes_received() const { return bytes_received_; }
  std::uint64_t bytes_sent() const { return bytes_sent_; }
  std::int64_t max_tensor_bytes() const { return max_tensor_bytes_; }
  std::int64_t max_total_bytes() const { return max_total_bytes_; }
  std::int64_t max_tensors() const { return max_tensors_; }

 private:
  std::shared_ptr<Tensor> Find(const std::string& name);
  void WorkOut(Tensor& t, std::size_t chunk, std::unique_lock<std::mutex>& lock);
  void ServeOpenStep(Tensor& t, std::unique_lock<std::mutex>& lock);
  // Stale modes: applies worker `w`'s complete push of `step` (staged in
  // t.open[w]) on its own; `lock` holds t.mu, released while it computes.
  void ApplyPush(Tensor& t, std::uint32_t w, std::uint64_t step,
                 std::unique_lock<std::mutex>& lock);
  absl::Status PullStale(Tensor& t, std::unique_lock<std::mutex>& lock, std::uint64_t step,
                         std::optional<std::uint32_t> puller,
                         std::chrono::steady_clock::time_point deadline, const EmitChunk& emit,
                         const std::function<bool()>& gone);
  // Waits on t's changes until `done`, or fails: shutdown, the puller gone, or
  // `deadline` passed (DEADLINE_EXCEEDED with `waiting_for`'s words).
  absl::Status Await(Tensor& t, std::unique_lock<std::mutex>& lock,
                     std::chrono::steady_clock::time_point deadline,
                     const std::function<bool()>& gone, const std::function<bool()>& done,
                     const std::function<std::string()>& waiting_for);

  const std::size_t chunk_bytes_;
  const std::int64_t max_tensor_bytes_, max_total_bytes_, max_tensors_;

  std::mutex mu_;  // guards tensors_, declared_bytes_ and shutdown_
  std::map<std::string, std::shared_ptr<Tensor>> tensors_;
  std::int64_t declared_bytes_ = 0;  // of every slice in tensors_
  bool shutdown_ = false;
  std::atomic<std::uint64_t> bytes_received_{0};
  std::atomic<std::uint64_t> bytes_sent_{0};
};

}  // namespace testbed
