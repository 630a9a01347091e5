// Tree reduce: ceil(log2 N) rounds up the binary combining tree (tree_shape.h).
// In level k, relative rank v with v mod 2^(k+1) == 2^k sends its partial
// result to v - 2^k, which reduces it; the root ends with the full reduction.
// Wire: every non-root rank sends its vector once: (N-1)M in total; the root
// receives ceil(log2 N)M.
#include "allreduce/chunking.h"
#include "allreduce/collectives.h"
#include "allreduce/tree_shape.h"

namespace testbed {

Schedule BuildReduceTree(int rank, int world_size, std::int64_t count, int root) {
  Schedule s{rank, world_size, count, {}};
  const int v = Mod(rank - root, world_size);
  const auto real = [&](int relative) { return Mod(relative + root, world_size); };
  for (int level = 0; level < TreeLevels(world_size); ++level) {
    Round& round = s.AddRound("reduce");
    const int half = 1 << level;
    if (v % (2 * half) == half) {
      s.Send(round, real(v - half), 0, count);
    } else if (v % (2 * half) == 0 && v + half < world_size) {
      s.RecvReduce(round, real(v + half), 0, count);
    }
  }
  return s;
}

}  // namespace testbed
