// An optimizer is the rule a parameter-server shard applies to its slice of a
// tensor once a step's gradients are summed (ps-lite's pluggable updater):
// NONE serves the sum itself, SGD, momentum and Adam update the parameters.
// One class per rule, one file each in common/optimizers/, found by name in a
// registry that each file adds itself to (TESTBED_REGISTER_OPTIMIZER): a new
// rule is its proto enum value, its file and its test, and nothing else.
//
// One instance serves one tensor slice and holds that slice's state (momentum's
// velocity, Adam's moments and step count). The store applies it a chunk at a
// time, one virtual call per chunk: Apply loops over the chunk's elements.
//
// Thread-safety: BeginStep is called alone, between steps. Apply is called for
// different chunks of one step concurrently, from different threads; a rule
// touches only the state of its chunk's elements and reads shared state that
// only BeginStep writes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/parameter_server.pb.h"

namespace testbed {

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // False for the pure-aggregation rule: its values are the summed gradient
  // itself, so the store sums straight into them, keeps no previous values,
  // accepts integer tensors, and need not call Apply.
  virtual bool Updates() const { return true; }

  // Sizes the state for a slice of `count` elements; called once, before the
  // first step (declaring a tensor again must not allocate it twice).
  virtual void Prepare(std::int64_t count) {}

  // Starts the next step (steps count from 1): called once per step, before
  // any Apply of it.
  virtual void BeginStep() {}

  // Elements [begin, begin + gradient.size()) of the slice, for the current
  // step: values[i] = rule(previous[i], gradient[i], state[begin + i]).
  // `previous` and `values` point at the chunk's first element; `previous` is
  // null for a rule that does not update.
  virtual void Apply(std::int64_t begin, std::span<const float> gradient, const float* previous,
                     float* values) = 0;
  virtual void Apply(std::int64_t begin, std::span<const double> gradient, const double* previous,
                     double* values) = 0;
};

// Makes a rule configured by the hyperparameters in `config` (its kind is not
// read: the name chose the rule).
using OptimizerFactory = std::unique_ptr<Optimizer> (*)(const proto::Optimizer& config);

// Adds `factory` under `name` (lower case) before main() runs; through
// TESTBED_REGISTER_OPTIMIZER only. Returns true, for a static initializer.
bool RegisterOptimizer(std::string_view name, OptimizerFactory factory);

// The known rules' names, sorted: "adam", "momentum", "none", "sgd".
std::vector<std::string> OptimizerNames();

// The name `config` asks for: its kind's name in parameter_server.proto, in
// lower case ("" for a kind the proto does not name).
std::string OptimizerName(const proto::Optimizer& config);

// A new rule called `name` (in any case: "sgd", "SGD"), configured by
// `config`; an unknown name is refused with the known ones.
absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(std::string_view name,
                                                         const proto::Optimizer& config);
// The rule `config`'s kind names.
absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const proto::Optimizer& config);

// Implements both Apply overloads with `Rule`'s template
//   template <typename T> void Run(std::int64_t begin, std::span<const T> gradient,
//                                  const T* previous, T* values);
// which the compiler specializes (and vectorizes) per element type.
template <typename Rule>
class ElementwiseOptimizer : public Optimizer {
 public:
  void Apply(std::int64_t begin, std::span<const float> gradient, const float* previous,
             float* values) final {
    static_cast<Rule*>(this)->template Run<float>(begin, gradient, previous, values);
  }
  void Apply(std::int64_t begin, std::span<const double> gradient, const double* previous,
             double* values) final {
    static_cast<Rule*>(this)->template Run<double>(begin, gradient, previous, values);
  }
};

}  // namespace testbed

// Registers `Class` (an Optimizer constructible from const proto::Optimizer&)
// under `name`, at static initialization. Use once per rule, in its file.
#define TESTBED_REGISTER_OPTIMIZER(name, Class)                                      \
  namespace {                                                                        \
  [[maybe_unused]] const bool registered_##Class = ::testbed::RegisterOptimizer(    \
      name, [](const ::testbed::proto::Optimizer& config)                            \
                -> std::unique_ptr<::testbed::Optimizer> {                           \
        return std::make_unique<Class>(config);                                      \
      });                                                                            \
  }
