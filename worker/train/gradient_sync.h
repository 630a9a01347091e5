// GradientSync: how one data-parallel worker turns its own gradient of a step
// into the parameters every worker holds after that step. Two kinds, one file
// each beside this one:
//   AllReduceSync  any scheduled all-reduce of the registry through the
//                  Executor over a Transport: sum, divide by N, then the
//                  optimizer runs on every worker (all apply the same update
//                  to the same parameters, so they stay equal).
//   PsSync         the parameter server through PsClient: the shards
//                  average the N gradients and run the optimizer, as in the
//                  parameter-server papers; synchronous, or (--ps-mode)
//                  asynchronous or bounded-staleness, where each push is
//                  applied on its own (server/parameter_store.h).
// The optimizer is the parameter server's own rule (common/optimizer.h) in
// both, so the two kinds differ only in where the update is computed.
//
// Thread-safety: one GradientSync per worker, used from that worker's thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/parameter_server.pb.h"

namespace testbed {

class GradientSync {
 public:
  virtual ~GradientSync() = default;

  // Backpropagation of `step` is about to write `gradient`. A sync that
  // overlaps communication with it starts from here; `gradient` must stay
  // valid until Step() returns.
  virtual void BeginBackward(std::uint64_t step, std::span<float> gradient) {}
  // gradient[offset, end) is final (backpropagation fills it from the end).
  virtual void GradientReadyFrom(std::int64_t offset) {}

  // `gradient` is this worker's gradient for `step` (steps count from 1); it
  // is used as scratch. On success `parameters` holds the parameters after
  // the step, the same on every worker (in the parameter server's stale
  // modes: the shards' current ones, with every worker's steps up to the
  // staleness bound in them, so they may differ between workers).
  virtual absl::Status Step(std::uint64_t step, std::span<float> gradient,
                            std::span<float> parameters) = 0;

  // Payload bytes this worker sent and received so far, as its transport or
  // client counted them.
  virtual std::uint64_t PayloadBytes() const = 0;

  // Of the last step's communication, the seconds that ran while the
  // backward pass was still computing (hidden behind it).
  virtual double OverlappedSeconds() const { return 0; }

  // The next steps run at the configured learning rate times `factor`
  // (warmup, worker_trainer.h). The rate is the optimizer's, fixed when the
  // shard declared it, so the factor scales the averaged gradient instead:
  // exactly a scaled rate for SGD, and for momentum the form with the rate
  // inside the velocity (v = mu v + rate g; Goyal et al. 2017, section 2.1).
  // Adam is invariant to the gradient's scale: the trainer refuses warmup
  // with it. The all-reduce scales after the exchange, the parameter server
  // before the push (the shard averages): with top-k the residual is kept
  // unscaled in the one, scaled in the other.
  void SetLearningRateFactor(float factor) { learning_rate_factor_ = factor; }

 protected:
  // gradient *= the learning-rate factor (nothing to do at 1).
  void ScaleForLearningRate(std::span<float> gradient) const {
    if (learning_rate_factor_ == 1.0f) return;
    for (float& g : gradient) g *= learning_rate_factor_;
  }
  float learning_rate_factor() const { return learning_rate_factor_; }

 private:
  float learning_rate_factor_ = 1.0f;
};

// The optimizer rule `name` ("sgd", "momentum", "adam") with its
// hyperparameters, as the parameter server declares it; averaging on.
// An unknown name is INVALID_ARGUMENT listing the known ones.
absl::StatusOr<proto::Optimizer> OptimizerConfig(const std::string& name, double learning_rate,
                                                 double momentum);

}  // namespace testbed
