// The input vectors a classroom trace starts from, shared by `testbed trace`
// (text) and `testbed lab` (JSON): every rank holds its own start value where
// the collective's semantics say it has data - everywhere for reductions,
// only its own chunk for all-gather, only on the root for broadcast - and 0
// ("nothing here yet") elsewhere. The start value is the caller's choice of
// encoding (10^r for digits people read, 2^r for a bitmask a page decodes).
//
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <vector>

#include "allreduce/collective.h"
#include "allreduce/inprocess_run.h"

namespace testbed {

// float64 vectors of `count` elements, one per rank.
std::vector<Bytes> TraceInputs(const Collective& collective, int workers, std::int64_t count,
                               int root, double (*start_value)(int workers, int rank));

}  // namespace testbed
