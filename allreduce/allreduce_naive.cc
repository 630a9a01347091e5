// Naive all-reduce: one round in which every rank sends its whole vector to
// every other rank and reduces the N-1 vectors it receives.
// Wire: N(N-1)M in total, (N-1)M out of and into every rank.
#include "allreduce/collectives.h"

namespace testbed {

Schedule BuildAllReduceNaive(int rank, int world_size, std::int64_t count) {
  Schedule s{rank, world_size, count, {}};
  if (world_size == 1) return s;
  Round& round = s.AddRound("all-to-all");
  for (int peer = 0; peer < world_size; ++peer) {
    if (peer == rank) continue;
    s.Send(round, peer, 0, count);
    s.RecvReduce(round, peer, 0, count);
  }
  return s;
}

}  // namespace testbed
