// Butterfly all-reduce (recursive doubling, full vector): log2 N rounds in
// which each rank swaps its whole vector with the rank whose index differs in
// one bit and reduces. For N not a power of two (p = largest power of two
// below N, r = N - p), MPICH's recipe: first the r "extra" ranks fold - among
// ranks 0..2r-1, each even rank sends its vector to the odd rank above it and
// sits out - then the p active ranks exchange, then each odd rank hands the
// result back to its even partner (unfold).
// Wire: p M log2 p + 2 r M in total (N M log2 N when N is a power of two);
// log2 p rounds, plus 2 when r > 0.
#include "allreduce/collectives.h"

namespace testbed {
namespace {

int LargestPowerOfTwoAtMost(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

Schedule BuildAllReduceButterfly(int rank, int world_size, std::int64_t count) {
  Schedule s{rank, world_size, count, {}};
  const int p = LargestPowerOfTwoAtMost(world_size);
  const int extra = world_size - p;
  const bool folded_pair = rank < 2 * extra;  // rank belongs to a fold pair
  const bool sits_out = folded_pair && rank % 2 == 0;

  if (extra > 0) {
    Round& fold = s.AddRound("fold");
    if (sits_out) {
      s.Send(fold, rank + 1, 0, count);
    } else if (folded_pair) {
      s.RecvReduce(fold, rank - 1, 0, count);
    }
  }

  // Active ranks are renumbered 0..p-1: pair (2i, 2i+1) becomes i, the rest shift down.
  const int active = folded_pair ? rank / 2 : rank - extra;
  const auto real = [&](int a) { return a < extra ? 2 * a + 1 : a + extra; };
  for (int mask = 1; mask < p; mask *= 2) {
    Round& round = s.AddRound("exchange");
    if (sits_out) continue;
    const int partner = real(active ^ mask);
    s.Send(round, partner, 0, count);
    s.RecvReduce(round, partner, 0, count);
  }

  if (extra > 0) {
    Round& unfold = s.AddRound("unfold");
    if (sits_out) {
      s.RecvCopy(unfold, rank + 1, 0, count);
    } else if (folded_pair) {
      s.Send(unfold, rank - 1, 0, count);
    }
  }
  return s;
}

}  // namespace testbed
