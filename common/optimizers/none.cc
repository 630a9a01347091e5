// NONE: pure aggregation. The value is the sum (or mean) of the workers'
// gradients, exactly the all-reduce result; no state, nothing kept between
// steps. The store sums straight into the values, so Apply is a copy it skips.
#include <algorithm>

#include "common/optimizer.h"

namespace testbed {
namespace {

class NoOptimizer final : public ElementwiseOptimizer<NoOptimizer> {
 public:
  explicit NoOptimizer(const proto::Optimizer&) {}
  bool Updates() const override { return false; }

  template <typename T>
  void Run(std::int64_t, std::span<const T> gradient, const T*, T* values) {
    if (gradient.data() != values) std::copy(gradient.begin(), gradient.end(), values);
  }
};

}  // namespace

TESTBED_REGISTER_OPTIMIZER("none", NoOptimizer)

}  // namespace testbed
