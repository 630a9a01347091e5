// Ring all-reduce (bandwidth-optimal): ring reduce-scatter, then ring
// all-gather of the reduced chunks. 2(N-1) rounds.
// Wire: 2(N-1)M in total, ~2(N-1)M/N per rank, the same on every link.
#include "allreduce/collectives.h"

namespace testbed {

Schedule BuildAllReduceRing(int rank, int world_size, std::int64_t count) {
  Schedule s = BuildReduceScatterRing(rank, world_size, count);
  s.Append(BuildAllGatherRing(rank, world_size, count));
  return s;
}

}  // namespace testbed
