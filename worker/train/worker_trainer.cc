#include "worker/train/worker_trainer.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

absl::StatusOr<proto::Optimizer> TrainingOptimizer(const TrainConfig& config, int workers) {
  double rate = config.learning_rate;
  if (config.lr_scaling == proto::LrScaling::linear) {
    rate *= workers;
  } else if (config.lr_scaling != proto::LrScaling::none) {
    return absl::InvalidArgumentError(absl::StrCat("unknown lr_scaling ",
                                                   static_cast<int>(config.lr_scaling),
                                                   " (choose from none, linear)"));
  }
  if (config.warmup_steps < 0) {
    return absl::InvalidArgumentError("--warmup-steps must not be negative");
  }
  if (config.warmup_steps > 0 && config.optimizer == "adam") {
    return absl::InvalidArgumentError(
        "--warmup-steps needs sgd or momentum: Adam's update does not depend on the gradient's "
        "scale, and warmup scales the gradient");
  }
  return OptimizerConfig(config.optimizer, rate, config.momentum);
}

float WarmupFactor(std::int64_t step, std::int64_t warmup_steps) {
  if (warmup_steps <= 0 || step >= warmup_steps) return 1.0f;
  return static_cast<float>(static_cast<double>(step) / static_cast<double>(warmup_steps));
}

std::vector<int> WorkerTrainer::LayerSizes(const TrainConfig& config, const Dataset& data) {
  std::vector<int> sizes{data.features()};
  sizes.insert(sizes.end(), config.hidden.begin(), config.hidden.end());
  sizes.push_back(data.classes);
  return sizes;
}

WorkerTrainer::WorkerTrainer(const TrainConfig& config, const Dataset& train, int rank,
                             int workers)
    : config_(config),
      train_(train),
      rank_(rank),
      model_(LayerSizes(config, train)),
      sampler_(train.samples(), config.batch * workers, config.seed),
      parameters_(model_.InitialParameters(config.seed)),
      gradient_(parameters_.size()) {}

std::int64_t WorkerTrainer::total_steps() const {
  return config_.steps > 0 ? config_.steps
                           : std::int64_t{config_.epochs} * sampler_.steps_per_epoch();
}

absl::StatusOr<StepStats> WorkerTrainer::Step(GradientSync& sync) {
  StepStats stats;
  const auto compute_start = std::chrono::steady_clock::now();
  const std::vector<int> indices = sampler_.Indices(steps_done_, rank_, config_.batch);
  batch_inputs_.resize(train_.features(), config_.batch);
  batch_labels_.resize(indices.size());
  for (std::size_t i = 0; i < indices.size(); ++i) {
    batch_inputs_.col(static_cast<Eigen::Index>(i)) = train_.inputs.col(indices[i]);
    batch_labels_[i] = train_.labels[indices[i]];
  }
  sync.SetLearningRateFactor(WarmupFactor(steps_done_ + 1, config_.warmup_steps));
  sync.BeginBackward(steps_done_ + 1, gradient_);
  stats.loss = model_.LossAndGradient(parameters_, batch_inputs_, batch_labels_, gradient_,
                                      [&](int layer) {
                                        sync.GradientReadyFrom(model_.LayerRange(layer).offset);
                                      });
  stats.compute_seconds = SecondsSince(compute_start);

  const auto sync_start = std::chrono::steady_clock::now();
  if (absl::Status s = sync.Step(steps_done_ + 1, gradient_, parameters_); !s.ok()) return s;
  stats.communication_seconds = SecondsSince(sync_start);
  stats.overlapped_seconds = sync.OverlappedSeconds();
  ++steps_done_;
  return stats;
}

}  // namespace testbed
