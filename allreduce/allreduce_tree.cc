// Tree all-reduce: tree reduce to rank 0, then tree broadcast from rank 0.
// 2 ceil(log2 N) rounds.
// Wire: 2(N-1)M in total; rank 0 and the inner ranks carry ceil(log2 N)M each
// way while the leaves carry M: the root's link is the bottleneck.
#include "allreduce/collectives.h"

namespace testbed {

Schedule BuildAllReduceTree(int rank, int world_size, std::int64_t count) {
  Schedule s = BuildReduceTree(rank, world_size, count, /*root=*/0);
  s.Append(BuildBroadcastTree(rank, world_size, count, /*root=*/0));
  return s;
}

}  // namespace testbed
