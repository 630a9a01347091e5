// The lab's trace of a collective, as JSON for the page's animation: the same
// schedules and the same in-process executor run as `testbed trace`, told
// round by round - every message (from, to, element range, reduce or copy)
// and every rank's buffer after the round. Rank r starts with 2^r, so each
// element's value is the bitmask of the ranks whose contributions it holds
// (exact in float64 for N <= 16); the page colours a block by its popcount.
// The parameter server ("ps") has no schedule: its trace, in the same shape,
// is built from its push/pull protocol over S shards (source "protocol"),
// not recorded from a run; its shards are nodes after the ranks.
//
// Thread-safety: pure function (it runs its own threads and joins them).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace testbed {

inline constexpr int kLabMaxWorkers = 16;           // N in the lab: 1..16
inline constexpr std::int64_t kLabMaxTraceCount = 64;  // elements a page can draw

// {"collective", "semantics", "summary", "source": "executor" | "protocol", "note",
//  "workers", "servers" (0 unless ps), "server_slices": [[begin, end) per shard],
//  "count", "element_bytes", "chunks", "formula", "formula_bytes", "formula_rounds",
//  "initial": [[mask per element] per node],
//  "rounds": [{"phase", "messages": [{"from", "to", "offset", "count", "action"}],
//              "buffers": [[mask...] per node], "bytes_so_far"}]}.
// Nodes 0..workers-1 are the ranks, workers..workers+servers-1 the shards (a
// shard's row is 0 outside its slice). `servers` (S, 1..N) is read for ps only.
// An unknown collective, or N, count or S out of range, is an InvalidArgument
// error with a one-line message.
absl::StatusOr<std::string> LabTraceJson(const std::string& collective, int workers,
                                         std::int64_t count, int servers = 1);

}  // namespace testbed
