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
// Segmented (RunOptions::segment_bytes > 0), the executor runs the schedule
// cut into segments (allreduce/segment_plan.h) with dependencies per segment
// instead of per round: segment s of round k+1 goes as soon as segment s of
// round k is in and reduced, so transfer and reduction overlap. Receives of
// the next round are posted before the current round is over (its scratch is
// a second slot), so the next round's rendezvous sends find them waiting. The
// result is bit-identical to the round-by-round run, and the payload is the
// same; only the number of messages grows.
//
// Messages are tagged (sequence << 16 | round), segmented ones
// (1 << 47 | sequence << 32 | round << 16 | segment): each Run() advances the
// sequence, so all ranks must run the same collectives in the same order,
// with the same segment size.
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
#include "allreduce/segment_plan.h"
#include "allreduce/transport/transport.h"

namespace testbed {

// Called after each round with the round's index, once its data is applied
// (segmented, later rounds may already be partly applied by then).
using ExecutorRoundObserver = std::function<void(std::size_t round)>;

struct ExecutorRunOptions {
  ExecutorRoundObserver observer = nullptr;
  // Cut every step into segments of at most this many bytes (whole elements,
  // at least one); 0 runs whole steps, round by round.
  std::size_t segment_bytes = 0;
};

class Executor {
 public:
  explicit Executor(Transport& transport) : transport_(transport) {}

  using RoundObserver = ExecutorRoundObserver;
  using RunOptions = ExecutorRunOptions;

  // Allocates and touches the scratch space `schedule` needs for `type`, in
  // memory of kind `memory`, run with `segment_bytes` (see RunOptions).
  void Prepare(const Schedule& schedule, DataType type, MemoryType memory = MemoryType::kHost,
               std::size_t segment_bytes = 0);

  // Runs `schedule` on `buffer`, which holds schedule.count elements of `type`.
  absl::Status Run(const Schedule& schedule, MutableBuffer buffer, DataType type, ReduceOp op,
                   const RunOptions& options = {});

 private:
  // Where one received step lands: scratch (then reduced or copied) or in place.
  struct Landing {
    const Step* step;
    std::size_t scratch_offset;  // bytes; only when !in_place
    bool in_place;
  };

  absl::Status RunRounds(const Schedule& schedule, MutableBuffer buffer, DataType type,
                         ReduceOp op, const RoundObserver& observer, std::uint64_t sequence);
  absl::Status RunSegments(const Schedule& schedule, MutableBuffer buffer, DataType type,
                           ReduceOp op, const RunOptions& options, std::uint64_t sequence);

  Transport& transport_;
  Allocation scratch_;
  std::vector<Landing> landings_;  // one round's; kept to reuse its memory
  std::uint64_t sequence_ = 0;
  // The last segment plan and what it was made from, reused while the same
  // schedule is run again (planning compares every pair of steps).
  Schedule planned_schedule_;
  SegmentPlan plan_;
};

// Bytes of scratch a round of `schedule` needs at most.
std::size_t ScratchBytes(const Schedule& schedule, DataType type);

// Rounds whose receives are posted at once, segmented: the current and the next.
inline constexpr std::size_t kScratchSlots = 2;

}  // namespace testbed
