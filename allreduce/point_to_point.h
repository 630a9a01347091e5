// Point-to-point transfers as schedules (issue 29's pipeline stages): one
// rank's activations to the next stage, its gradients back to the one
// before. A pipeline step is a schedule of one round like any collective's,
// so the executor, the traffic count and the simulator take it unchanged.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "allreduce/schedule.h"

namespace testbed {

// One round: `rank` sends its whole buffer of `count` elements to `to` and
// receives `count` elements from `from` into it (either -1 for none; a rank
// may do both, sending what it had before the receive lands).
Schedule BuildSendRecv(int rank, int world_size, std::int64_t count, int to, int from);

// A pipeline's forward hand-off over `stages` (world ranks, in stage order):
// each stage sends to the next and receives from the one before; the first
// only sends, the last only receives. Ranks not among the stages do nothing.
Schedule BuildPipelineShift(int rank, int world_size, std::int64_t count,
                            const std::vector<int>& stages);

}  // namespace testbed
