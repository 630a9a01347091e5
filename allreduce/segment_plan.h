// A SegmentPlan is a Schedule cut into segments, as data: every step becomes
// one or more operations of at most `segment_elements` elements, and each
// operation knows which others must finish before it may go. The Executor
// runs a plan with dependencies per segment instead of per round, so segment
// s of round k+1 is sent as soon as segment s of round k has arrived and been
// reduced, while the rest of round k is still on the wire (NCCL's chunk steps,
// MPI's segmented ring).
//
// The dependencies keep, element by element, what the round-by-round executor
// guarantees (schedule.h), so the result is bit-identical to it:
// - a send reads a range only after every receive of an earlier round that
//   writes into it has been applied;
// - a receive is applied (or, landing in place, posted) only after every send
//   of its own or an earlier round that reads the range has completed, and
//   after every receive into the range that comes before it in (round, step)
//   order has been applied, so reductions happen in the same order.
// And a send to another peer than the sends of the last earlier round with
// sends waits, segment by segment, for their segment of the same index: a
// rank's sends keep their rounds' order, as whole steps do (otherwise a round
// of sends only ends at once, and a tree's root sent both broadcast halves
// together, sharing its link).
// Both sides of a message cut it the same way, since a send and its receive
// have the same count and every rank uses the same segment size.
//
// Thread-safety: plain values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "allreduce/schedule.h"

namespace testbed {

struct SegmentOp {
  StepKind kind;
  int peer;
  std::int64_t offset;  // in elements, into the rank's buffer
  std::int64_t count;   // in elements, > 0
  std::uint32_t round;
  std::uint32_t step;                // index within its round
  std::uint32_t segment;             // within its step; with the round, names the message
  bool in_place;                     // a copy-receive that lands straight in the buffer
  std::int64_t scratch_offset;       // in elements, within its round's scratch slot
  int prerequisites;                 // operations that must finish before this one
  std::vector<std::uint32_t> dependents;  // operations waiting on this one

  bool IsReceive() const { return kind != StepKind::kSend; }
};

struct SegmentPlan {
  std::int64_t segment_elements = 0;  // what steps were cut into (see SegmentElements)
  std::int64_t slot_elements = 0;     // scratch one round's receives need at most
  std::vector<SegmentOp> ops;         // in (round, step, segment) order
  std::vector<std::uint32_t> receives_per_round;
};

// Most segments one step may be cut into: the message tag has 16 bits for it.
inline constexpr std::int64_t kMaxSegmentsPerStep = std::int64_t{1} << 16;

// The segment length, in elements, for `segment_bytes` of `element_size`-byte
// elements in a schedule of `count` elements: at least one element, and long
// enough that no step needs more than kMaxSegmentsPerStep segments.
std::int64_t SegmentElements(std::size_t segment_bytes, std::size_t element_size,
                             std::int64_t count);

// The segment size `--segment auto` uses for a message of `message_bytes`
// per rank; 0 means whole steps (see the definition for why).
std::size_t AutoSegmentBytes(std::int64_t message_bytes);

// The segment size when the spec asks for none: AutoSegmentBytes for
// messages of 16 MiB and more, whole steps below (see the definition for the
// measurements).
std::size_t DefaultSegmentBytes(std::int64_t message_bytes);

// The segment size for memory staged through host memory (device memory on
// a UCX without CUDA) when none was asked for: never 0, since whole steps
// would expose every copy down before a send and up after a receive; see the
// definition for the size.
std::size_t StagedSegmentBytes(std::int64_t message_bytes);

// Cuts `schedule` (which must be valid) into segments of `segment_elements`.
SegmentPlan PlanSegments(const Schedule& schedule, std::int64_t segment_elements);

}  // namespace testbed
