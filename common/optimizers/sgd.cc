// SGD: w -= lr g. No state.
#include "common/optimizer.h"

namespace testbed {
namespace {

class Sgd final : public ElementwiseOptimizer<Sgd> {
 public:
  explicit Sgd(const proto::Optimizer& config) : lr_(config.learning_rate()) {}

  template <typename T>
  void Run(std::int64_t, std::span<const T> gradient, const T* previous, T* values) {
    const T* g = gradient.data();
    const double lr = lr_;  // a local: stores to `values` cannot change it
    const std::size_t n = gradient.size();
    for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<T>(previous[i] - lr * g[i]);
  }

 private:
  const double lr_;
};

}  // namespace

TESTBED_REGISTER_OPTIMIZER("sgd", Sgd)

}  // namespace testbed
