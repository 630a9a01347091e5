// Ring reduce-scatter: N-1 rounds. In round s rank r sends chunk (r-s-1) to
// rank r+1 and reduces chunk (r-s-2) arriving from rank r-1, so each chunk
// travels once around the ring gathering one contribution per hop and comes to
// rest, fully reduced, on the rank of the same index.
// Wire: every chunk crosses N-1 links: (N-1)M in total, ~(N-1)M/N per rank.
#include "allreduce/chunking.h"
#include "allreduce/collectives.h"

namespace testbed {

Schedule BuildReduceScatterRing(int rank, int world_size, std::int64_t count) {
  Schedule s{rank, world_size, count, {}};
  const int next = Mod(rank + 1, world_size);
  const int prev = Mod(rank - 1, world_size);
  for (int step = 0; step < world_size - 1; ++step) {
    Round& round = s.AddRound("reduce-scatter");
    const Chunk out = ChunkOf(count, world_size, Mod(rank - step - 1, world_size));
    const Chunk in = ChunkOf(count, world_size, Mod(rank - step - 2, world_size));
    s.Send(round, next, out.offset, out.count);
    s.RecvReduce(round, prev, in.offset, in.count);
  }
  return s;
}

}  // namespace testbed
