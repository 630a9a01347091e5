// MPICH's recipe for running a power-of-two algorithm on any N: with p the
// largest power of two <= N and r = N - p extra ranks, among ranks 0..2r-1
// each even rank folds its whole vector into the odd rank above it (one
// round) and sits out; the p active ranks, renumbered 0..p-1, run the
// algorithm; each odd rank of a pair then hands the result back (one round).
// Butterfly and halving-doubling share it; it adds 2rM to the wire and two
// rounds when r > 0, none when N is a power of two.
//
// Thread-safety: a plain value.
#pragma once

#include <cstdint>

#include "allreduce/schedule.h"

namespace testbed {

class PowerOfTwoFold {
 public:
  PowerOfTwoFold(int rank, int world_size) : rank_(rank) {
    while (p_ * 2 <= world_size) p_ *= 2;
    extra_ = world_size - p_;
    folded_pair_ = rank < 2 * extra_;
    sits_out_ = folded_pair_ && rank % 2 == 0;
  }

  int p() const { return p_; }
  // This rank takes no part between the fold and the unfold.
  bool sits_out() const { return sits_out_; }
  // This rank's index among the p active ranks (pair (2i, 2i+1) is i, the
  // rest shift down by r); meaningless when it sits out.
  int active() const { return folded_pair_ ? rank_ / 2 : rank_ - extra_; }
  // The rank of active index `a`.
  int RankOf(int a) const { return a < extra_ ? 2 * a + 1 : a + extra_; }

  // The fold round (none when N is a power of two): the whole vector, reduced.
  void AddFold(Schedule& s, std::int64_t count) const {
    if (extra_ == 0) return;
    Round& fold = s.AddRound("fold");
    if (sits_out_) {
      s.Send(fold, rank_ + 1, 0, count);
    } else if (folded_pair_) {
      s.RecvReduce(fold, rank_ - 1, 0, count);
    }
  }
  // The unfold round: the result back to the rank that sat out.
  void AddUnfold(Schedule& s, std::int64_t count) const {
    if (extra_ == 0) return;
    Round& unfold = s.AddRound("unfold");
    if (sits_out_) {
      s.RecvCopy(unfold, rank_ + 1, 0, count);
    } else if (folded_pair_) {
      s.Send(unfold, rank_ - 1, 0, count);
    }
  }

 private:
  int rank_;
  int p_ = 1;
  int extra_ = 0;
  bool folded_pair_ = false;
  bool sits_out_ = false;
};

}  // namespace testbed
