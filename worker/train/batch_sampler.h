// Which samples each worker trains on at each step. Every epoch is one
// permutation of the training set, a function of (seed, epoch) alone; step t
// of the epoch takes the next N*B samples of it as the global batch, and
// worker r takes samples [r*B, (r+1)*B) of that. So N workers with batch B
// see, step for step, exactly the samples one worker with batch N*B sees -
// what makes data-parallel training comparable with (and testable against)
// single-process training. The samples left over at an epoch's end are
// skipped.
//
// Thread-safety: a value; each worker holds its own.
#pragma once

#include <cstdint>
#include <vector>

namespace testbed {

class BatchSampler {
 public:
  // `samples` in the training set; `global_batch` = N * B, at most `samples`.
  BatchSampler(int samples, int global_batch, std::uint64_t seed);

  int steps_per_epoch() const { return samples_ / global_batch_; }

  // The `per_worker` sample indices of worker `rank` at `step` (from 0,
  // counted across epochs).
  std::vector<int> Indices(std::int64_t step, int rank, int per_worker);

 private:
  void Shuffle(std::int64_t epoch);

  int samples_, global_batch_;
  std::uint64_t seed_;
  std::int64_t epoch_ = -1;  // of order_
  std::vector<int> order_;
};

}  // namespace testbed
