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
#include "allreduce/power_of_two_fold.h"

namespace testbed {

Schedule BuildAllReduceButterfly(int rank, int world_size, std::int64_t count) {
  Schedule s{rank, world_size, count, {}};
  const PowerOfTwoFold fold(rank, world_size);
  fold.AddFold(s, count);
  for (int mask = 1; mask < fold.p(); mask *= 2) {
    Round& round = s.AddRound("exchange");
    if (fold.sits_out()) continue;
    const int partner = fold.RankOf(fold.active() ^ mask);
    s.Send(round, partner, 0, count);
    s.RecvReduce(round, partner, 0, count);
  }
  fold.AddUnfold(s, count);
  return s;
}

}  // namespace testbed
