// One tensor's state on a parameter-server shard: the declaration, the
// pushes of the open step, the served step's values chunk by chunk, and the
// stale modes' clocks (the rules are in server/parameter_store.h). Private to
// the store's sources: server/parameter_store.cc declares tensors,
// server/parameter_store_values.cc works out their values, and
// server/parameter_store_push_pull.cc runs their pushes and pulls.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "allreduce/data_type.h"
#include "common/optimizer.h"
#include "proto/parameter_server.pb.h"
#include "server/parameter_store.h"

namespace testbed {

using Bytes = std::vector<std::byte>;

// One worker's complete push of one step: pieces that together cover the
// slice in order, and the owners that keep their memory alive.
struct StagedPush {
  std::vector<std::span<const std::byte>> pieces;
  std::vector<std::shared_ptr<const void>> owners;
};

enum class ChunkState : std::uint8_t { kPending, kWorking, kDone };

struct ParameterStore::Tensor {
  // A new declaration's tensor, its step 0 served (all zeros); the
  // declaration was checked and fits the shard's limits.
  static std::shared_ptr<Tensor> Make(const proto::TensorSpec& spec, int shards, int shard,
                                      Slice slice, DataType type, std::size_t chunk_bytes,
                                      std::unique_ptr<Optimizer> optimizer);

  proto::TensorSpec spec;
  int shards = 1, shard = 0;
  Slice slice;
  DataType type = DataType::kFloat32;
  std::size_t element = 4;
  std::size_t chunk_elements = 1;  // per worked-out and pulled chunk

  std::mutex mu;
  // A step opened or completed, a chunk became ready or was worked out, a
  // push failed, or the shard shuts down.
  std::condition_variable changed_cv;
  std::uint64_t completed = 0;  // the last step every worker committed
  // The step whose values are served and worked out: `completed`, or
  // completed + 1 once every worker has joined it (its chunks are then worked
  // out as they become ready, while its pushes still arrive).
  std::uint64_t served = 0;

  // The pushes of step completed + 1, by worker.
  std::vector<bool> joined;           // BeginPush accepted it
  std::uint32_t joins = 0;            // how many are true
  std::vector<bool> pushed;           // its push committed
  std::uint32_t pushes = 0;           // how many are true
  std::vector<std::int64_t> staged;   // elements of the slice staged so far
  std::vector<StagedPush> open;       // the staged pieces, until the step is served
  // A step whose push broke off after the step was served (0: none): its
  // pulls and pushes fail with `failure`.
  std::uint64_t failed_step = 0;
  absl::Status failure;

  // The served step, worked out chunk by chunk.
  std::vector<StagedPush> gradients;     // its pushes, until every chunk is worked out
  std::vector<ChunkState> chunks;
  std::size_t chunks_pending = 0;        // not kDone
  std::size_t ready = 0;  // leading chunks every worker has staged (all, once complete)
  std::shared_ptr<Bytes> values;         // what pulls of `served` get
  std::shared_ptr<const Bytes> previous; // the values before it, where optimizers start
                                         // (unused, null, for NONE)
  std::vector<std::shared_ptr<Bytes>> spares;  // buffers for the next steps' values
  std::unique_ptr<Optimizer> optimizer;  // the rule, with this slice's state

  // Stale modes only (BOUNDED_STALENESS, ASYNCHRONOUS): pushes stage into
  // `open` and `staged`, `values` is the current version; the fields above
  // for served steps are unused.
  bool stale = false;
  std::uint64_t staleness = 0;       // k; the largest uint64 for ASYNCHRONOUS
  std::vector<std::uint64_t> clock;  // per worker: the last step it pushed completely
  std::vector<bool> pushing;         // a push of the worker's next step is under way
  bool applying = false;             // a thread is applying a push (one at a time)
  bool broken = false;               // a push broke off: all fail with `failure`

  // Stale modes: a pull of `step` by `puller` (if known) may take the values.
  bool StaleReady(std::uint64_t step, std::optional<std::uint32_t> puller) const {
    if (puller && clock[*puller] < step) return false;
    return step <= staleness || *std::min_element(clock.begin(), clock.end()) >= step - staleness;
  }
  // Stale modes: the workers a pull of `step` by `puller` still waits for.
  std::string WorkersBehind(std::uint64_t step, std::optional<std::uint32_t> puller) const {
    std::string names;
    for (std::size_t w = 0; w < clock.size(); ++w) {
      const bool own = puller && *puller == w;
      if ((own && clock[w] < step) || (step > staleness && clock[w] < step - staleness)) {
        absl::StrAppend(&names, names.empty() ? "" : ", ", w, " (at step ", clock[w], ")");
      }
    }
    return names;
  }

  std::size_t bytes() const { return static_cast<std::size_t>(slice.count) * element; }
  std::string Name() const { return absl::StrCat("tensor '", spec.name(), "'"); }
  // Elements [begin, end) of the slice form chunk `k`.
  std::int64_t ChunkBegin(std::size_t k) const {
    return static_cast<std::int64_t>(k * chunk_elements);
  }
  std::int64_t ChunkEnd(std::size_t k) const {
    return std::min<std::int64_t>(slice.count, ChunkBegin(k + 1));
  }
  // Chunk `k` of the served step can be worked out: every worker staged it.
  bool ChunkReady(std::size_t k) const { return served == completed || k < ready; }
  // How many leading chunks every worker of the open step has staged.
  std::size_t StagedChunks() const {
    const std::int64_t least = *std::min_element(staged.begin(), staged.end());
    if (least >= slice.count) return chunks.size();
    return static_cast<std::size_t>(least) / chunk_elements;
  }
  // The workers whose push has not reached element `end` of the slice.
  std::string WorkersShortOf(std::int64_t end) const {
    std::string names;
    for (std::size_t w = 0; w < staged.size(); ++w) {
      if (!joined[w] || staged[w] < end) absl::StrAppend(&names, names.empty() ? "" : ", ", w);
    }
    return names;
  }
  // Worker `w`'s push of the served step covered the slice; the last one
  // completes the step (so a worker that pulled all of it may push the next).
  void CountPush(std::uint32_t w) {
    pushed[w] = true;
    if (++pushes < spec.workers()) return;
    completed = served;
    ready = chunks.size();
    std::fill(joined.begin(), joined.end(), false);
    std::fill(pushed.begin(), pushed.end(), false);
    std::fill(staged.begin(), staged.end(), 0);
    joins = 0;
    pushes = 0;
    changed_cv.notify_all();
  }
  // Lets go of the served step's received memory, keeping a place per worker.
  void ReleaseGradients() {
    for (StagedPush& push : gradients) push = StagedPush{};
  }
};

}  // namespace testbed
