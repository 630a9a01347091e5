// The Executor runs one rank's Schedule over a Transport: for each round it
// posts every send and receive, waits for all of them, then applies the
// received data (reduce or copy into place). It is the only code that moves
// collective data, whatever the algorithm or the transport.
//
// Received data lands in scratch space owned by the executor, except copies
// into a range no send of the same round reads, which land in place. Scratch
// is allocated and touched once (Prepare) and reused, so timed iterations
// never pay first-touch page faults. The buffer says what memory it is;
// scratch is of the same kind, and every copy and reduction goes through
// that memory's operations (allreduce/memory.h): the executor never touches
// the bytes itself.
//
// Messages are tagged (sequence << 16 | round): each Run() advances the
// sequence, so all ranks must run the same collectives in the same order.
//
// Thread-safety: one Executor per rank, used from one thread. It borrows the
// transport, which must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "allreduce/data_type.h"
#include "allreduce/memory.h"
#include "allreduce/schedule.h"
#include "allreduce/transport/transport.h"

namespace testbed {

class Executor {
 public:
  explicit Executor(Transport& transport) : transport_(transport) {}

  // Called after each round with the round's index, once its data is applied.
  using RoundObserver = std::function<void(std::size_t round)>;

  // Allocates and touches the scratch space `schedule` needs for `type`, in
  // memory of kind `memory`.
  void Prepare(const Schedule& schedule, DataType type, MemoryType memory = MemoryType::kHost);

  // Runs `schedule` on `buffer`, which holds schedule.count elements of `type`.
  absl::Status Run(const Schedule& schedule, MutableBuffer buffer, DataType type, ReduceOp op,
                   const RoundObserver& observer = nullptr);

 private:
  // Where one received step lands: scratch (then reduced or copied) or in place.
  struct Landing {
    const Step* step;
    std::size_t scratch_offset;  // bytes; only when !in_place
    bool in_place;
  };

  Transport& transport_;
  Allocation scratch_;
  std::vector<Landing> landings_;  // one round's; kept to reuse its memory
  std::uint64_t sequence_ = 0;
};

// Bytes of scratch a round of `schedule` needs at most.
std::size_t ScratchBytes(const Schedule& schedule, DataType type);

}  // namespace testbed
