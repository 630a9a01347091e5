#include "worker/train/batch_sampler.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>

namespace testbed {

BatchSampler::BatchSampler(int samples, int global_batch, std::uint64_t seed)
    : samples_(samples), global_batch_(global_batch), seed_(seed) {
  if (global_batch <= 0 || global_batch > samples) {
    throw std::invalid_argument("the global batch must be between 1 and the training set's size");
  }
}

void BatchSampler::Shuffle(std::int64_t epoch) {
  order_.resize(samples_);
  std::iota(order_.begin(), order_.end(), 0);
  // One stream per epoch, so any epoch's order is known without the ones before.
  std::seed_seq seeds{static_cast<std::uint32_t>(seed_), static_cast<std::uint32_t>(seed_ >> 32),
                      static_cast<std::uint32_t>(epoch)};
  std::mt19937_64 random(seeds);
  std::shuffle(order_.begin(), order_.end(), random);
  epoch_ = epoch;
}

std::vector<int> BatchSampler::Indices(std::int64_t step, int rank, int per_worker) {
  const std::int64_t epoch = step / steps_per_epoch();
  if (epoch != epoch_) Shuffle(epoch);
  const std::int64_t begin =
      (step % steps_per_epoch()) * global_batch_ + std::int64_t{rank} * per_worker;
  return {order_.begin() + begin, order_.begin() + begin + per_worker};
}

}  // namespace testbed
