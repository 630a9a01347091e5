#include "allreduce/segment_plan.h"

#include <algorithm>

namespace testbed {
namespace {

bool Overlap(const SegmentOp& a, const SegmentOp& b) {
  return a.offset < b.offset + b.count && b.offset < a.offset + a.count;
}

// Whether a segment of `before` that overlaps one of `op` must finish before
// it may go (see the file comment). Both are the first segments of their steps.
bool MustPrecede(const SegmentOp& before, const SegmentOp& op) {
  if (!op.IsReceive()) return before.IsReceive() && before.round < op.round;
  if (!before.IsReceive()) return before.round <= op.round;
  return before.round < op.round || (before.round == op.round && before.step < op.step);
}

// The ops of one step: [begin, end) of SegmentPlan::ops, sorted by offset.
struct StepOps {
  std::size_t begin;
  std::size_t end;
};

// Links every overlapping pair of segments of two steps, `before`'s first.
// Segments of a step are sorted and disjoint, so one merge finds the pairs.
void Link(SegmentPlan& plan, StepOps before, StepOps after) {
  std::size_t a = before.begin;
  std::size_t b = after.begin;
  while (a < before.end && b < after.end) {
    SegmentOp& first = plan.ops[a];
    SegmentOp& second = plan.ops[b];
    if (Overlap(first, second)) {
      first.dependents.push_back(static_cast<std::uint32_t>(b));
      ++second.prerequisites;
    }
    // Step past whichever segment ends first; the other may overlap more.
    if (first.offset + first.count <= second.offset + second.count) {
      ++a;
    } else {
      ++b;
    }
  }
}

// Segment j of `after`, a send to another peer than `before`'s, goes once
// segment j of `before` (a send of an earlier round) went: a rank's sends to
// different peers keep their rounds' order segment by segment, as whole steps
// keep it round by round. Without it a round of sends only ends at once, so a
// tree's root sent both broadcast halves together and shared its link, and
// the child that forwards got its copy M/B later (docs/simulator.md,
// "Segments, measured": one segment per step was 25-43% slower than whole steps).
void LinkSendsInOrder(SegmentPlan& plan, StepOps before, StepOps after) {
  const std::size_t pairs = std::min(before.end - before.begin, after.end - after.begin);
  for (std::size_t j = 0; j < pairs; ++j) {
    plan.ops[before.begin + j].dependents.push_back(static_cast<std::uint32_t>(after.begin + j));
    ++plan.ops[after.begin + j].prerequisites;
  }
}

}  // namespace

std::int64_t SegmentElements(std::size_t segment_bytes, std::size_t element_size,
                             std::int64_t count) {
  const auto requested = static_cast<std::int64_t>(segment_bytes / element_size);
  const std::int64_t fewest = (count + kMaxSegmentsPerStep - 1) / kMaxSegmentsPerStep;
  return std::max<std::int64_t>({requested, fewest, 1});
}

// Each segment is a message of its own and costs a message's latency (tens of
// microseconds over TCP on a loaded host), so segments stay large: a message
// is cut only once it is large enough that 16 segments still each carry a
// quarter of a MiB or more. Quarter-MiB segments were slower than whole steps
// (ring, N = 4, 16 and 64 MiB) over both TCP and shared memory.
std::size_t AutoSegmentBytes(std::int64_t message_bytes) {
  constexpr std::int64_t kSmallest = std::int64_t{256} << 10;
  constexpr std::int64_t kLargest = std::int64_t{4} << 20;
  if (message_bytes < 16 * kSmallest) return 0;
  return static_cast<std::size_t>(std::clamp(message_bytes / 16, kSmallest, kLargest));
}

// Ring at N = 4 on loopback, M/16 segments against whole steps, means of 10-12
// interleaved runs each (docs/speed.md, "Where the time goes"): over TCP 5%
// faster at 16 MiB and 7% at 64 MiB, no different at 4 MiB; over shared memory
// (cma's single-copy rendezvous, one handshake per segment) 14% slower at
// 4 MiB, no different at 16 MiB, 3% faster at 64 MiB. So what a user gets
// without asking cuts messages of 16 MiB and more, on either transport.
std::size_t DefaultSegmentBytes(std::int64_t message_bytes) {
  constexpr std::int64_t kFrom = std::int64_t{16} << 20;
  return message_bytes < kFrom ? 0 : AutoSegmentBytes(message_bytes);
}

// Staged, a whole step is copied down before any of it is sent and up only
// after all of it arrived: both copies are exposed, in full. Cut into
// segments, only the first segment's copy down and the last one's copy up
// are; the rest hide behind the wire, since a pinned copy runs several times
// faster than a send over TCP. So a staged message is always segmented, within
// AutoSegmentBytes's bounds, which were measured for what a message costs:
// M/16, at least a quarter of a MiB (smaller segments were slower than whole
// steps over TCP and shared memory: each one pays a message's latency) and at
// most 4 MiB (so the exposed copies stay two segments, a few hundred
// microseconds at PCIe speed against tens of milliseconds on the wire for
// the messages that reach it). Below 4 MiB messages, where AutoSegmentBytes
// leaves whole steps, a step no longer than the quarter MiB still goes as one
// segment: no more messages than whole steps, and pipelined across rounds.
// The figures of the GPU machine (experiments/gpu/check.sh) are what to
// revisit it against.
std::size_t StagedSegmentBytes(std::int64_t message_bytes) {
  constexpr std::int64_t kSmallest = std::int64_t{256} << 10;
  return std::max<std::size_t>(AutoSegmentBytes(message_bytes), kSmallest);
}

SegmentPlan PlanSegments(const Schedule& schedule, std::int64_t segment_elements) {
  SegmentPlan plan;
  plan.segment_elements = segment_elements;
  std::vector<StepOps> steps;
  std::vector<std::size_t> round_end;  // index past each round's last step in `steps`
  for (std::size_t k = 0; k < schedule.rounds.size(); ++k) {
    const Round& round = schedule.rounds[k];
    std::int64_t scratch = 0;
    std::uint32_t receives = 0;
    for (std::size_t i = 0; i < round.steps.size(); ++i) {
      const Step& step = round.steps[i];
      const bool in_place = LandsInPlace(step, round);
      const std::size_t first = plan.ops.size();
      for (std::int64_t begin = 0, s = 0; begin < step.count; begin += segment_elements, ++s) {
        plan.ops.push_back(SegmentOp{
            .kind = step.kind,
            .peer = step.peer,
            .offset = step.offset + begin,
            .count = std::min(segment_elements, step.count - begin),
            .round = static_cast<std::uint32_t>(k),
            .step = static_cast<std::uint32_t>(i),
            .segment = static_cast<std::uint32_t>(s),
            .in_place = in_place,
            .scratch_offset = scratch + begin,
            .prerequisites = 0,
            .dependents = {},
        });
        if (step.IsReceive()) ++receives;
      }
      if (step.IsReceive() && !in_place) scratch += step.count;
      steps.push_back(StepOps{first, plan.ops.size()});
    }
    plan.slot_elements = std::max(plan.slot_elements, scratch);
    plan.receives_per_round.push_back(receives);
    round_end.push_back(steps.size());
  }
  // Everything a step may depend on is in its own round or before it.
  for (std::size_t b = 0; b < steps.size(); ++b) {
    const SegmentOp& op = plan.ops[steps[b].begin];
    for (std::size_t a = 0; a < round_end[op.round]; ++a) {
      if (a == b || !MustPrecede(plan.ops[steps[a].begin], op)) continue;
      Link(plan, steps[a], steps[b]);
    }
  }
  // And each send after the sends of the last earlier round that had any.
  std::vector<std::size_t> last_sends, round_sends;
  for (std::size_t k = 0, b = 0; k < round_end.size(); ++k) {
    round_sends.clear();
    for (; b < round_end[k]; ++b) {
      const SegmentOp& op = plan.ops[steps[b].begin];
      if (op.IsReceive()) continue;
      round_sends.push_back(b);
      for (std::size_t a : last_sends) {
        if (plan.ops[steps[a].begin].peer != op.peer) LinkSendsInOrder(plan, steps[a], steps[b]);
      }
    }
    if (!round_sends.empty()) last_sends = round_sends;
  }
  return plan;
}

}  // namespace testbed
