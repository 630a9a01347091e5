#include "allreduce/executor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

constexpr int kRoundBits = 16;

// A copy-receive may land in place unless a send of the same round reads the
// range (the send must see the buffer as it was when the round began).
bool LandsInPlace(const Step& recv, const Round& round) {
  if (recv.kind != StepKind::kRecvCopy) return false;
  return std::none_of(round.steps.begin(), round.steps.end(), [&](const Step& s) {
    return s.kind == StepKind::kSend && s.offset < recv.offset + recv.count &&
           recv.offset < s.offset + s.count;
  });
}

}  // namespace

std::size_t ScratchBytes(const Schedule& schedule, DataType type) {
  std::int64_t most = 0;
  for (const Round& round : schedule.rounds) {
    std::int64_t elements = 0;
    for (const Step& step : round.steps) {
      if (step.IsReceive() && !LandsInPlace(step, round)) elements += step.count;
    }
    most = std::max(most, elements);
  }
  return static_cast<std::size_t>(most) * ElementSize(type);
}

void Executor::Prepare(const Schedule& schedule, DataType type, MemoryType memory) {
  const std::size_t needed = ScratchBytes(schedule, type);
  // Allocations are zeroed, which writes - and so faults in - every page.
  if (scratch_.size() < needed || scratch_.buffer().memory != memory) {
    scratch_ = MemoryOpsFor(memory).Allocate(needed);
  }
}

absl::Status Executor::Run(const Schedule& schedule, MutableBuffer buffer, DataType type,
                           ReduceOp op, const RoundObserver& observer) {
  const std::size_t elem = ElementSize(type);
  if (buffer.size != static_cast<std::size_t>(schedule.count) * elem) {
    return absl::InvalidArgumentError(absl::StrCat("buffer of ", buffer.size,
                                                   " bytes for a schedule of ", schedule.count,
                                                   " ", std::string(Name(type)), " elements"));
  }
  if (transport_.rank() != schedule.rank || transport_.world_size() != schedule.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule for rank ", schedule.rank, " of ", schedule.world_size, " on transport rank ",
        transport_.rank(), " of ", transport_.world_size()));
  }
  // A bad range would write outside `buffer`: refuse it before posting anything.
  if (absl::Status st = Validate(schedule); !st.ok()) return st;
  if (schedule.rounds.size() >= (std::size_t{1} << kRoundBits)) {
    return absl::InvalidArgumentError("schedule has too many rounds to tag");
  }
  Prepare(schedule, type, buffer.memory);
  const MemoryOps& memory = MemoryOpsFor(buffer.memory);
  const MutableBuffer scratch = scratch_.buffer();
  const std::uint64_t sequence = sequence_++ & (kMaxTag >> kRoundBits);

  std::vector<Landing>& landings = landings_;
  for (std::size_t k = 0; k < schedule.rounds.size(); ++k) {
    const Round& round = schedule.rounds[k];
    const std::uint64_t tag = (sequence << kRoundBits) | k;
    landings.clear();
    std::size_t scratch_used = 0;
    for (const Step& step : round.steps) {
      const std::size_t offset = static_cast<std::size_t>(step.offset) * elem;
      const std::size_t bytes = static_cast<std::size_t>(step.count) * elem;
      absl::Status st;
      if (step.kind == StepKind::kSend) {
        st = transport_.PostSend(step.peer, tag, buffer.subspan(offset, bytes));
      } else if (LandsInPlace(step, round)) {
        landings.push_back({&step, 0, true});
        st = transport_.PostRecv(step.peer, tag, buffer.subspan(offset, bytes));
      } else {
        landings.push_back({&step, scratch_used, false});
        st = transport_.PostRecv(step.peer, tag, scratch.subspan(scratch_used, bytes));
        scratch_used += bytes;
      }
      if (!st.ok()) return st;
    }
    if (absl::Status st = transport_.WaitAll(); !st.ok()) return st;
    for (const Landing& landing : landings) {
      if (landing.in_place) continue;
      const std::size_t bytes = static_cast<std::size_t>(landing.step->count) * elem;
      const MutableBuffer dst = buffer.subspan(landing.step->offset * elem, bytes);
      const ConstBuffer src = scratch.subspan(landing.scratch_offset, bytes);
      if (landing.step->kind == StepKind::kRecvReduce) {
        memory.Reduce(type, op, dst, src, landing.step->count);
      } else {
        memory.Copy(dst, src);
      }
    }
    if (observer) observer(k);
  }
  return absl::OkStatus();
}

}  // namespace testbed
