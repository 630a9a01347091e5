#include "allreduce/executor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

constexpr int kRoundBits = 16;
constexpr int kSegmentBits = 16;
// Segmented messages set the tag's top bit, so they never match a
// round-by-round message of a neighbouring collective.
constexpr std::uint64_t kSegmentedTag = std::uint64_t{1} << (kTagBits - 1);
constexpr std::uint64_t kSequenceMask = (kSegmentedTag - 1) >> kRoundBits;
constexpr std::uint64_t kSegmentedSequenceMask =
    (kSegmentedTag - 1) >> (kRoundBits + kSegmentBits);

bool SameSchedule(const Schedule& a, const Schedule& b) {
  if (a.rank != b.rank || a.world_size != b.world_size || a.count != b.count ||
      a.rounds.size() != b.rounds.size()) {
    return false;
  }
  for (std::size_t k = 0; k < a.rounds.size(); ++k) {
    if (a.rounds[k].steps != b.rounds[k].steps) return false;
  }
  return true;
}

// One segmented run: posts what the plan allows, and on every completion
// (Transport::WaitAny) applies what arrived and posts what that unblocked.
class SegmentRun {
 public:
  SegmentRun(Transport& transport, const SegmentPlan& plan, MutableBuffer buffer,
             MutableBuffer scratch, DataType type, ReduceOp op,
             const Executor::RoundObserver& observer, std::uint64_t sequence)
      : transport_(transport),
        plan_(plan),
        buffer_(buffer),
        scratch_(scratch),
        type_(type),
        op_(op),
        elem_(ElementSize(type)),
        observer_(observer),
        tag_base_(kSegmentedTag | (sequence & kSegmentedSequenceMask)
                                      << (kRoundBits + kSegmentBits)),
        memory_(MemoryOpsFor(buffer.memory)),
        waiting_(plan.ops.size()),
        arrived_(plan.ops.size(), false),
        receives_left_(plan.receives_per_round),
        round_begin_(plan.receives_per_round.size() + 1, plan.ops.size()) {
    for (std::size_t i = 0; i < plan.ops.size(); ++i) waiting_[i] = plan.ops[i].prerequisites;
    for (std::size_t i = plan.ops.size(); i-- > 0;) round_begin_[plan.ops[i].round] = i;
    for (std::size_t k = round_begin_.size() - 1; k-- > 0;) {
      round_begin_[k] = std::min(round_begin_[k], round_begin_[k + 1]);
    }
  }

  absl::Status Run() {
    for (std::uint32_t id = 0; id < plan_.ops.size(); ++id) {
      const SegmentOp& op = plan_.ops[id];
      const bool gated_by_slot = op.IsReceive() && !op.in_place;
      if (gated_by_slot ? op.round < kScratchSlots : waiting_[id] == 0) {
        if (absl::Status st = Post(id); !st.ok()) return st;
      }
    }
    if (absl::Status st = AdvanceRounds(); !st.ok()) return st;
    while (finished_ < plan_.ops.size()) {
      absl::StatusOr<std::size_t> index = transport_.WaitAny();
      if (!index.ok()) return index.status();
      const std::uint32_t id = posted_[*index];
      const SegmentOp& op = plan_.ops[id];
      arrived_[id] = true;
      // A receive into scratch still waits for what must precede it.
      if (op.IsReceive() && !op.in_place && waiting_[id] > 0) continue;
      if (absl::Status st = Finish(id); !st.ok()) return st;
    }
    return transport_.WaitAll();
  }

 private:
  absl::Status Post(std::uint32_t id) {
    const SegmentOp& op = plan_.ops[id];
    const std::uint64_t tag = tag_base_ | std::uint64_t{op.round} << kSegmentBits | op.segment;
    const std::size_t bytes = static_cast<std::size_t>(op.count) * elem_;
    posted_.push_back(id);
    if (op.kind == StepKind::kSend) {
      return transport_.PostSend(op.peer, tag, buffer_.subspan(op.offset * elem_, bytes));
    }
    return transport_.PostRecv(op.peer, tag, op.in_place ? buffer_.subspan(op.offset * elem_, bytes)
                                                         : ScratchOf(op));
  }

  MutableBuffer ScratchOf(const SegmentOp& op) const {
    const std::size_t slot = op.round % kScratchSlots;
    const auto start = static_cast<std::size_t>(slot * plan_.slot_elements + op.scratch_offset);
    return scratch_.subspan(start * elem_, static_cast<std::size_t>(op.count) * elem_);
  }

  // Marks `first` finished (applying it first if it landed in scratch), then
  // whatever that unblocked, breadth first.
  absl::Status Finish(std::uint32_t first) {
    std::vector<std::uint32_t>& queue = queue_;
    queue.assign(1, first);
    for (std::size_t q = 0; q < queue.size(); ++q) {
      const std::uint32_t id = queue[q];
      const SegmentOp& op = plan_.ops[id];
      if (op.IsReceive()) {
        if (!op.in_place) Apply(op);
        --receives_left_[op.round];
      }
      ++finished_;
      for (const std::uint32_t next : op.dependents) {
        if (--waiting_[next] > 0) continue;
        const SegmentOp& unblocked = plan_.ops[next];
        if (!unblocked.IsReceive() || unblocked.in_place) {
          if (absl::Status st = Post(next); !st.ok()) return st;
        } else if (arrived_[next]) {
          queue.push_back(next);
        }
      }
    }
    return AdvanceRounds();
  }

  void Apply(const SegmentOp& op) {
    const std::size_t bytes = static_cast<std::size_t>(op.count) * elem_;
    const MutableBuffer dst = buffer_.subspan(op.offset * elem_, bytes);
    const MutableBuffer src = ScratchOf(op);
    if (op.kind == StepKind::kRecvReduce) {
      memory_.Reduce(type_, op_, dst, src, op.count);
    } else {
      memory_.Copy(dst, src);
    }
  }

  // Rounds whose receives are all applied free their scratch slot: the
  // receives of the round kScratchSlots later may then be posted.
  absl::Status AdvanceRounds() {
    const std::size_t rounds = receives_left_.size();
    while (rounds_done_ < rounds && receives_left_[rounds_done_] == 0) {
      if (observer_) observer_(rounds_done_);
      const std::size_t opened = ++rounds_done_ + kScratchSlots - 1;
      if (opened >= rounds) continue;
      for (std::size_t id = round_begin_[opened]; id < round_begin_[opened + 1]; ++id) {
        const SegmentOp& op = plan_.ops[id];
        if (!op.IsReceive() || op.in_place) continue;
        if (absl::Status st = Post(static_cast<std::uint32_t>(id)); !st.ok()) return st;
      }
    }
    return absl::OkStatus();
  }

  Transport& transport_;
  const SegmentPlan& plan_;
  const MutableBuffer buffer_;
  const MutableBuffer scratch_;
  const DataType type_;
  const ReduceOp op_;
  const std::size_t elem_;
  const Executor::RoundObserver& observer_;
  const std::uint64_t tag_base_;
  const MemoryOps& memory_;
  std::vector<int> waiting_;                  // by op: prerequisites not yet finished
  std::vector<bool> arrived_;                 // by op: the transport reported it
  std::vector<std::uint32_t> receives_left_;  // by round: receives not yet finished
  std::vector<std::size_t> round_begin_;      // by round: its first op; then the end
  std::vector<std::uint32_t> posted_;         // by transport index: the op posted
  std::vector<std::uint32_t> queue_;          // Finish()'s work list, kept for its memory
  std::size_t finished_ = 0;                  // ops finished
  std::size_t rounds_done_ = 0;               // rounds before it have all receives applied
};

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

void Executor::Prepare(const Schedule& schedule, DataType type, MemoryType memory,
                       std::size_t segment_bytes) {
  const std::size_t needed = ScratchBytes(schedule, type) * (segment_bytes > 0 ? kScratchSlots : 1);
  // Allocations are zeroed, which writes - and so faults in - every page.
  if (scratch_.size() < needed || scratch_.buffer().memory != memory) {
    scratch_ = MemoryOpsFor(memory).Allocate(needed);
  }
}

absl::Status Executor::Run(const Schedule& schedule, MutableBuffer buffer, DataType type,
                           ReduceOp op, const RunOptions& options) {
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
  Prepare(schedule, type, buffer.memory, options.segment_bytes);
  const std::uint64_t sequence = sequence_++;
  if (options.segment_bytes > 0) {
    return RunSegments(schedule, buffer, type, op, options, sequence);
  }
  return RunRounds(schedule, buffer, type, op, options.observer, sequence);
}

absl::Status Executor::RunSegments(const Schedule& schedule, MutableBuffer buffer, DataType type,
                                   ReduceOp op, const RunOptions& options,
                                   std::uint64_t sequence) {
  const std::int64_t segment =
      SegmentElements(options.segment_bytes, ElementSize(type), schedule.count);
  if (plan_.segment_elements != segment || !SameSchedule(planned_schedule_, schedule)) {
    plan_ = PlanSegments(schedule, segment);
    planned_schedule_ = schedule;
  }
  return SegmentRun(transport_, plan_, buffer, scratch_.buffer(), type, op, options.observer,
                    sequence)
      .Run();
}

absl::Status Executor::RunRounds(const Schedule& schedule, MutableBuffer buffer, DataType type,
                                 ReduceOp op, const RoundObserver& observer,
                                 std::uint64_t sequence) {
  const std::size_t elem = ElementSize(type);
  const MemoryOps& memory = MemoryOpsFor(buffer.memory);
  const MutableBuffer scratch = scratch_.buffer();
  std::vector<Landing>& landings = landings_;
  for (std::size_t k = 0; k < schedule.rounds.size(); ++k) {
    const Round& round = schedule.rounds[k];
    const std::uint64_t tag = ((sequence & kSequenceMask) << kRoundBits) | k;
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
