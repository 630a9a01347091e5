// Tree broadcast: the reduce tree (tree_shape.h) run downwards, ceil(log2 N)
// rounds. In level k (from the top), relative rank v with v mod 2^(k+1) == 0
// sends the vector to v + 2^k.
// Wire: every non-root rank receives the vector once: (N-1)M in total.
#include "allreduce/chunking.h"
#include "allreduce/collectives.h"
#include "allreduce/tree_shape.h"

namespace testbed {

Schedule BuildBroadcastTree(int rank, int world_size, std::int64_t count, int root) {
  Schedule s{rank, world_size, count, {}};
  const int v = Mod(rank - root, world_size);
  const auto real = [&](int relative) { return Mod(relative + root, world_size); };
  for (int level = TreeLevels(world_size) - 1; level >= 0; --level) {
    Round& round = s.AddRound("broadcast");
    const int half = 1 << level;
    if (v % (2 * half) == 0 && v + half < world_size) {
      s.Send(round, real(v + half), 0, count);
    } else if (v % (2 * half) == half) {
      s.RecvCopy(round, real(v - half), 0, count);
    }
  }
  return s;
}

}  // namespace testbed
