// Schedule builders, one per collective, each a pure function of
// (rank, world_size, count[, root or placement]). allreduce/ALGORITHMS.md documents each
// one's steps and its bytes on the wire; collective.h puts them in a registry.
#pragma once

#include <cstdint>

#include "allreduce/placement.h"
#include "allreduce/schedule.h"

namespace testbed {

// All-reduce: every rank ends with the element-wise reduction of all vectors.
Schedule BuildAllReduceNaive(int rank, int world_size, std::int64_t count);
Schedule BuildAllReduceRing(int rank, int world_size, std::int64_t count);
Schedule BuildAllReduceTree(int rank, int world_size, std::int64_t count);
Schedule BuildAllReduceButterfly(int rank, int world_size, std::int64_t count);
Schedule BuildAllReduceHalvingDoubling(int rank, int world_size, std::int64_t count);
// Reduce-scatter inside each rack, all-reduce across racks, all-gather inside.
Schedule BuildAllReduceHierarchical(int rank, int world_size, std::int64_t count,
                                    const Placement& placement);
// Its rounds: 2(K-1) + waves * 2(R-1) for R racks, K ranks in the largest.
int HierarchicalRounds(int world_size, std::int64_t count, const Placement& placement);

// Reduce-scatter: rank r ends with the reduction of chunk r (chunking.h).
Schedule BuildReduceScatterRing(int rank, int world_size, std::int64_t count);
// All-gather: rank r starts with chunk r valid; every rank ends with all chunks.
Schedule BuildAllGatherRing(int rank, int world_size, std::int64_t count);
// Broadcast: every rank ends with the root's vector.
Schedule BuildBroadcastTree(int rank, int world_size, std::int64_t count, int root);
// Reduce: the root ends with the reduction of all vectors.
Schedule BuildReduceTree(int rank, int world_size, std::int64_t count, int root);

}  // namespace testbed
