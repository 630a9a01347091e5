// Momentum (heavy ball): v = mu v + g; w -= lr v. The velocity v, one double
// per element of the slice, starts at zero.
#include <vector>

#include "common/optimizer.h"

namespace testbed {
namespace {

class Momentum final : public ElementwiseOptimizer<Momentum> {
 public:
  explicit Momentum(const proto::Optimizer& config)
      : lr_(config.learning_rate()), mu_(config.momentum()) {}
  void Prepare(std::int64_t count) override { velocity_.assign(count, 0.0); }

  template <typename T>
  void Run(std::int64_t begin, std::span<const T> gradient, const T* previous, T* values) {
    const T* g = gradient.data();
    double* v = velocity_.data() + begin;
    const double lr = lr_, mu = mu_;  // locals: stores through `v` cannot change them
    const std::size_t n = gradient.size();
    for (std::size_t i = 0; i < n; ++i) {
      v[i] = mu * v[i] + g[i];
      values[i] = static_cast<T>(previous[i] - lr * v[i]);
    }
  }

 private:
  const double lr_, mu_;
  std::vector<double> velocity_;  // by element of the slice
};

}  // namespace

TESTBED_REGISTER_OPTIMIZER("momentum", Momentum)

}  // namespace testbed
