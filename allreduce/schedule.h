// A Schedule is what one rank does in one collective, as data: an ordered
// list of rounds, each a set of sends and receives of element ranges to and
// from peers. Collective builders are pure functions
//   (rank, world_size, count) -> Schedule
// with no I/O; the Executor runs a schedule over a Transport, and traffic,
// traces and cost models are read off the same data without running it.
//
// Round semantics (what the Executor guarantees and builders rely on): all
// steps of a round are posted together and the round ends when all complete.
// Sends read the buffer as it was when the round began; received data is
// applied (reduced or copied into place) only after the round's sends are done.
// Every rank of a collective has the same number of rounds, so "round k" names
// the same moment on every rank; a rank with nothing to do in a round has an
// empty step list. Steps that would move zero elements are never emitted.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace testbed {

enum class StepKind {
  kSend,        // send buffer[offset, offset+count) to peer
  kRecvReduce,  // receive count elements from peer, reduce into buffer[offset, ...)
  kRecvCopy,    // receive count elements from peer, copy into buffer[offset, ...)
};

struct Step {
  StepKind kind;
  int peer;
  std::int64_t offset;  // in elements
  std::int64_t count;   // in elements, > 0

  bool IsReceive() const { return kind != StepKind::kSend; }
  friend bool operator==(const Step&, const Step&) = default;
};

struct Round {
  std::string_view phase;  // static label for traces: "reduce-scatter", "fold", ...
  std::vector<Step> steps;
};

struct Schedule {
  int rank = 0;
  int world_size = 1;
  std::int64_t count = 0;  // elements in each rank's buffer
  std::vector<Round> rounds;

  // Builders call these; zero-element steps are dropped here, in one place.
  Round& AddRound(std::string_view phase);
  void Send(Round& round, int peer, std::int64_t offset, std::int64_t count);
  void RecvReduce(Round& round, int peer, std::int64_t offset, std::int64_t count);
  void RecvCopy(Round& round, int peer, std::int64_t offset, std::int64_t count);

  // Appends `next`'s rounds after this schedule's (ring all-reduce is
  // reduce-scatter then all-gather). Both must be for the same rank and size.
  void Append(const Schedule& next);

  std::int64_t ElementsSent() const;
  std::int64_t ElementsReceived() const;
};

// Checks one rank's schedule on its own: peers in range and not self, ranges
// inside the buffer, at most one send and one receive per peer per round (the
// executor tags messages by round), and no copy-receive overlapping another
// receive of the same round (reduce-receives may overlap: naive reduces N-1
// vectors into one).
absl::Status Validate(const Schedule& schedule);

// Checks that the schedules of all ranks fit together: every send in round k
// from a to b is matched by exactly one receive in round k on b from a, of the
// same element count, and nothing else is received.
absl::Status ValidateMatching(const std::vector<Schedule>& all_ranks);

std::string_view Name(StepKind kind);

// Whether receive `recv` of `round` may land straight in the buffer: a
// copy-receive whose range no send of the same round reads (the send must see
// the buffer as it was when the round began). Other receives land in scratch.
bool LandsInPlace(const Step& recv, const Round& round);

}  // namespace testbed
