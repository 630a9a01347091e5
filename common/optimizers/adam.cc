// Adam (Kingma & Ba, 2015), with bias correction:
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   w -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// with t the step, counted from 1. m and v are one double per element of the
// slice, starting at zero. Unset (zero) hyperparameters take the paper's
// defaults: b1 0.9, b2 0.999, eps 1e-8.
#include <cmath>
#include <vector>

#include "common/optimizer.h"

namespace testbed {
namespace {

class Adam final : public ElementwiseOptimizer<Adam> {
 public:
  explicit Adam(const proto::Optimizer& config)
      : lr_(config.learning_rate()),
        b1_(config.beta1() > 0 ? config.beta1() : 0.9),
        b2_(config.beta2() > 0 ? config.beta2() : 0.999),
        eps_(config.epsilon() > 0 ? config.epsilon() : 1e-8) {}
  void Prepare(std::int64_t count) override {
    m_.assign(count, 0.0);
    v_.assign(count, 0.0);
  }
  void BeginStep() override {
    ++step_;
    c1_ = 1 - std::pow(b1_, static_cast<double>(step_));
    c2_ = 1 - std::pow(b2_, static_cast<double>(step_));
  }

  template <typename T>
  void Run(std::int64_t begin, std::span<const T> gradient, const T* previous, T* values) {
    const T* g = gradient.data();
    double* m = m_.data() + begin;
    double* v = v_.data() + begin;
    // Locals: stores through `m` and `v` cannot change them.
    const double lr = lr_, b1 = b1_, b2 = b2_, eps = eps_, c1 = c1_, c2 = c2_;
    const std::size_t n = gradient.size();
    for (std::size_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * static_cast<double>(g[i]) * g[i];
      values[i] = static_cast<T>(previous[i] - lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps));
    }
  }

 private:
  const double lr_, b1_, b2_, eps_;
  std::uint64_t step_ = 0;   // the current step, from 1
  double c1_ = 0, c2_ = 0;   // its bias corrections, 1 - b^t
  std::vector<double> m_, v_;  // first and second moments, by element of the slice
};

}  // namespace

TESTBED_REGISTER_OPTIMIZER("adam", Adam)

}  // namespace testbed
