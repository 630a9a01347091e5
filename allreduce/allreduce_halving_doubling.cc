// Halving-doubling all-reduce (Rabenseifner's algorithm; what MPICH and Gloo
// use for large messages): a reduce-scatter by recursive halving, then an
// all-gather by recursive doubling, over p = 2^floor(log2 N) active ranks.
// The vector is cut into p chunks (chunking.h); active rank a ends the
// reduce-scatter holding the reduced chunk a.
//  - Reduce-scatter, distance p/2, p/4, ..., 1: a rank holding chunks
//    [lo, hi) pairs with the active rank `distance` away, which holds the same
//    range; the lower of the two sends its upper half and reduces the
//    partner's lower half into its own (the higher one the other way round).
//  - All-gather, distance 1, 2, ..., p/2: the same pairs in reverse order swap
//    the ranges they hold, so each rank's range doubles back to [0, p).
// For N not a power of two (r = N - p), the extra ranks fold in first and out
// again last (power_of_two_fold.h, as in butterfly).
// Rounds: 2 log2 p, plus 2 when r > 0.
// Wire: 2(N-1)M in total, exactly, for any M - uneven chunks change who moves
// which element, never how many move. In halving round k = 1..log2 p the
// active ranks form 2^(k-1) groups whose ranges partition the vector, each
// group p/2^k pairs that move their range once (each side sends the half the
// other keeps): (p/2^k)M per round, (p-1)M per phase; doubling mirrors it.
// Fold and unfold add rM each: 2(p-1)M + 2rM = 2(N-1)M.
// Per rank, each way: about 2(p-1)M/p, plus M for the r fold partners.
#include "allreduce/chunking.h"
#include "allreduce/collectives.h"
#include "allreduce/power_of_two_fold.h"

namespace testbed {
namespace {

// The elements of chunks [first, last) of `count` cut into `parts`.
Chunk ChunkRange(std::int64_t count, int parts, int first, int last) {
  const Chunk begin = ChunkOf(count, parts, first);
  const Chunk end = ChunkOf(count, parts, last - 1);
  return Chunk{begin.offset, end.offset + end.count - begin.offset};
}

}  // namespace

Schedule BuildAllReduceHalvingDoubling(int rank, int world_size, std::int64_t count) {
  Schedule s{rank, world_size, count, {}};
  const PowerOfTwoFold fold(rank, world_size);
  const int p = fold.p();
  const bool sits_out = fold.sits_out();
  const int active = fold.active();
  const auto real = [&](int a) { return fold.RankOf(a); };
  fold.AddFold(s, count);

  // Reduce-scatter by recursive halving: [lo, hi) is the range of chunks this
  // rank still reduces; it halves every round and ends as [active, active + 1).
  int lo = 0;
  int hi = p;
  for (int distance = p / 2; distance >= 1; distance /= 2) {
    Round& round = s.AddRound("reduce-scatter");
    if (sits_out) continue;
    const int partner = real(active ^ distance);
    const int mid = lo + distance;
    const bool lower = (active & distance) == 0;
    const Chunk keep = lower ? ChunkRange(count, p, lo, mid) : ChunkRange(count, p, mid, hi);
    const Chunk give = lower ? ChunkRange(count, p, mid, hi) : ChunkRange(count, p, lo, mid);
    s.Send(round, partner, give.offset, give.count);
    s.RecvReduce(round, partner, keep.offset, keep.count);
    if (lower) {
      hi = mid;
    } else {
      lo = mid;
    }
  }

  // All-gather by recursive doubling: swap [lo, hi) for the partner's
  // adjacent range of the same size; the range doubles back to [0, p).
  for (int distance = 1; distance < p; distance *= 2) {
    Round& round = s.AddRound("all-gather");
    if (sits_out) continue;
    const int partner = real(active ^ distance);
    const bool lower = (active & distance) == 0;
    const int their_lo = lower ? hi : lo - distance;
    const Chunk mine = ChunkRange(count, p, lo, hi);
    const Chunk theirs = ChunkRange(count, p, their_lo, their_lo + distance);
    s.Send(round, partner, mine.offset, mine.count);
    s.RecvCopy(round, partner, theirs.offset, theirs.count);
    if (lower) {
      hi += distance;
    } else {
      lo -= distance;
    }
  }

  fold.AddUnfold(s, count);
  return s;
}

}  // namespace testbed
