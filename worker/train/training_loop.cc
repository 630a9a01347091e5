#include "worker/train/training_loop.h"

#include <algorithm>
#include <optional>

namespace testbed {
namespace {

// Sums of one interval's steps.
struct Interval {
  std::int64_t steps = 0;
  double loss = 0, compute = 0, communication = 0, overlapped = 0;
  std::uint64_t payload_start = 0;

  void Add(const StepStats& step) {
    ++steps;
    loss += step.loss;
    compute += step.compute_seconds;
    communication += step.communication_seconds;
    overlapped += step.overlapped_seconds;
  }
  // Fills the per-step means of `row`.
  void Fill(proto::TrainingRow& row, std::uint64_t payload_now) const {
    const double n = static_cast<double>(std::max<std::int64_t>(steps, 1));
    row.set_loss(loss / n);
    row.set_compute_seconds(compute / n);
    row.set_communication_seconds(communication / n);
    row.set_overlapped_communication_seconds(overlapped / n);
    row.set_step_seconds((compute + communication) / n);
    row.set_payload_bytes(static_cast<std::uint64_t>((payload_now - payload_start) / n));
  }
};

// The rate step `step` ran at: scaled for N workers, then warmed up.
double EffectiveLearningRate(const proto::TrainingRow& header, std::int64_t step) {
  const double scaled = header.learning_rate() *
                        (header.lr_scaling() == "linear" ? header.workers() : 1);
  return scaled * WarmupFactor(step, header.warmup_steps());
}

}  // namespace

absl::Status RunTraining(WorkerTrainer& trainer, GradientSync& sync, const Dataset& train,
                         const Dataset* test, const ReportConfig& report,
                         const proto::TrainingRow& header, const TrainingRowSink& sink) {
  const std::int64_t total = trainer.total_steps();
  const std::int64_t every = report.every_steps > 0 ? report.every_steps : trainer.steps_per_epoch();
  const int workers = static_cast<int>(header.workers());
  Interval interval, run;
  double training_seconds = 0;
  std::optional<double> time_to_target;
  proto::TrainingRow last;
  while (trainer.steps_done() < total) {
    absl::StatusOr<StepStats> step = trainer.Step(sync);
    if (!step.ok()) return step.status();
    interval.Add(*step);
    run.Add(*step);
    training_seconds += step->compute_seconds + step->communication_seconds;
    const bool report_now = trainer.steps_done() % every == 0 || trainer.steps_done() == total;
    if (test == nullptr || !report_now) continue;

    proto::TrainingRow row = header;
    row.set_kind(proto::TrainingRow::PROGRESS);
    row.set_step(static_cast<std::uint64_t>(trainer.steps_done()));
    row.set_epoch(static_cast<double>(trainer.steps_done()) / trainer.steps_per_epoch());
    row.set_training_seconds(training_seconds);
    row.set_effective_learning_rate(EffectiveLearningRate(header, trainer.steps_done()));
    interval.Fill(row, sync.PayloadBytes());
    row.set_train_accuracy(
        trainer.model().Accuracy(trainer.parameters(), train, report.train_accuracy_samples));
    row.set_train_accuracy_samples(static_cast<std::uint32_t>(
        report.train_accuracy_samples > 0 ? std::min(report.train_accuracy_samples, train.samples())
                                          : train.samples()));
    row.set_test_accuracy(trainer.model().Accuracy(trainer.parameters(), *test));
    if (!time_to_target && row.test_accuracy() >= report.target_accuracy) {
      time_to_target = training_seconds;
    }
    sink(row);
    last = row;
    interval = Interval{.payload_start = sync.PayloadBytes()};
  }
  if (test == nullptr) return absl::OkStatus();

  proto::TrainingRow row = last;
  row.set_kind(proto::TrainingRow::RUN);
  run.Fill(row, sync.PayloadBytes());
  row.set_samples_per_second(training_seconds > 0 ? static_cast<double>(total) * workers *
                                                        header.batch_per_worker() /
                                                        training_seconds
                                                  : 0);
  row.set_target_accuracy(report.target_accuracy);
  if (time_to_target) row.set_time_to_target_seconds(*time_to_target);
  sink(row);
  return absl::OkStatus();
}

}  // namespace testbed
