// One data-parallel worker: its copy of the model and parameters, its share
// of each global batch (BatchSampler), and its training step - forward and
// backward pass, then the GradientSync that makes every worker's parameters
// the same again. Compute and synchronisation are timed apart.
//
// Thread-safety: one WorkerTrainer per worker thread; the data set is
// borrowed (read only) and must outlive it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/training.pb.h"
#include "worker/train/batch_sampler.h"
#include "worker/train/dataset.h"
#include "worker/train/gradient_sync.h"
#include "worker/train/mlp.h"

namespace testbed {

struct TrainConfig {
  std::vector<int> hidden = {128};  // hidden layer widths
  int batch = 64;                   // per worker: B
  std::string optimizer = "sgd";    // sgd, momentum, adam
  double learning_rate = 0.05;
  double momentum = 0.9;            // momentum's mu
  int epochs = 1;
  std::int64_t steps = 0;           // when > 0, instead of epochs
  std::uint64_t seed = 1;           // initial parameters and the order of samples
  // Learning-rate scaling for N workers (Goyal et al. 2017): none, or
  // linear: the rate times N, as the global batch is N times larger.
  proto::LrScaling::Kind lr_scaling = proto::LrScaling::none;
  // Steps over which the rate ramps up linearly: step t of the first K runs
  // at t/K of it (0: none).
  std::int64_t warmup_steps = 0;
};

// The optimizer rule of `config` for `workers` workers: its rate scaled by
// lr_scaling. Refuses an unknown rule or scaling by name, and warmup with
// Adam, whose update does not depend on the gradient's scale (warmup scales
// the gradient: gradient_sync.h).
absl::StatusOr<proto::Optimizer> TrainingOptimizer(const TrainConfig& config, int workers);

// The fraction of the rate step `step` (from 1) runs at: min(1, step / K).
float WarmupFactor(std::int64_t step, std::int64_t warmup_steps);

struct StepStats {
  float loss = 0;  // this worker's batch
  double compute_seconds = 0;        // forward and backward pass
  double communication_seconds = 0;  // exposed: after the backward pass, until synchronised
  double overlapped_seconds = 0;     // hidden: communication during the backward pass
};

class WorkerTrainer {
 public:
  WorkerTrainer(const TrainConfig& config, const Dataset& train, int rank, int workers);

  // {features, hidden..., classes} of the model a config builds on `data`.
  static std::vector<int> LayerSizes(const TrainConfig& config, const Dataset& data);

  // The next step (steps_done() + 1), synchronised through `sync`.
  absl::StatusOr<StepStats> Step(GradientSync& sync);

  std::int64_t steps_done() const { return steps_done_; }
  // What the config asks for: `steps`, or `epochs` whole epochs.
  std::int64_t total_steps() const;
  int steps_per_epoch() const { return sampler_.steps_per_epoch(); }
  Mlp& model() { return model_; }
  std::span<float> parameters() { return parameters_; }

 private:
  const TrainConfig config_;
  const Dataset& train_;
  const int rank_;
  Mlp model_;
  BatchSampler sampler_;
  std::vector<float> parameters_;
  std::vector<float> gradient_;
  Eigen::MatrixXf batch_inputs_;
  std::vector<int> batch_labels_;
  std::int64_t steps_done_ = 0;
};

}  // namespace testbed
