#include "worker/train/rank_training.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "allreduce/collective.h"
#include "proto/enum_text.h"
#include "worker/train/allreduce_sync.h"
#include "worker/train/compression.h"
#include "worker/train/mlp.h"
#include "worker/train/ps_sync.h"

namespace testbed {

namespace {

// The checks of a setup that no one field can make alone.
absl::Status CheckSetup(const TrainingSetup& setup) {
  for (int width : setup.train.hidden) {
    if (width < 1) return absl::InvalidArgumentError("hidden layer widths must be at least 1");
  }
  if (setup.train.steps < 0 || setup.train.warmup_steps < 0 || setup.report.every_steps < 0) {
    return absl::InvalidArgumentError("steps, warmup_steps and report_every_steps are counts");
  }
  if (!RunsOnParameterServer(setup.sync) &&
      FindCollective(setup.sync, Kinds::kScheduledAllReduce) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown --sync '", setup.sync, "' (choose from ps, ",
        CollectiveNames(Kinds::kScheduledAllReduce), ")"));
  }
  if (setup.ps_mode && !RunsOnParameterServer(setup.sync)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ps-mode ", setup.ps_mode->Name(), " needs --sync ps (", setup.sync,
                     " is an all-reduce: every step is synchronous)"));
  }
  return TrainingOptimizer(setup.train, setup.workers).status();
}

}  // namespace

absl::StatusOr<TrainingSetup> TrainingSetupFromSpec(const proto::TrainingSpec& spec) {
  if (HasSweepAxes(spec)) {
    return absl::InvalidArgumentError(
        "a training spec with sweep axes is many runs; a rank trains one");
  }
  proto::TrainingSpec run = spec;
  ApplyRunDefaults(run);
  TrainingSetup setup;
  setup.workers = static_cast<int>(run.workers());
  setup.servers = static_cast<int>(run.servers());
  setup.sync = run.sync();
  setup.bucket_bytes = spec.bucket_bytes();
  setup.overlap = spec.overlap();
  absl::StatusOr<CompressionConfig> compression = CompressionOf(spec.compression());
  if (!compression.ok()) return compression.status();
  setup.compression = *compression;
  if (spec.has_ps_mode()) {
    absl::StatusOr<PsMode> mode = PsModeOf(spec.ps_mode());
    if (!mode.ok()) return mode.status();
    setup.ps_mode = *mode;
  }
  TrainConfig& train = setup.train;
  if (spec.hidden_size() > 0) train.hidden.assign(spec.hidden().begin(), spec.hidden().end());
  if (spec.batch() > 0) train.batch = static_cast<int>(spec.batch());
  if (!spec.optimizer().empty()) train.optimizer = spec.optimizer();
  if (spec.has_learning_rate()) train.learning_rate = spec.learning_rate();
  if (spec.has_momentum()) train.momentum = spec.momentum();
  if (spec.epochs() > 0) train.epochs = static_cast<int>(spec.epochs());
  train.steps = static_cast<std::int64_t>(spec.steps());
  if (spec.has_seed()) train.seed = spec.seed();
  train.lr_scaling = spec.lr_scaling();
  train.warmup_steps = static_cast<std::int64_t>(spec.warmup_steps());
  ReportConfig& report = setup.report;
  report.every_steps = static_cast<std::int64_t>(spec.report_every_steps());
  if (spec.has_train_accuracy_samples()) {
    report.train_accuracy_samples = static_cast<int>(spec.train_accuracy_samples());
  }
  if (spec.has_target_accuracy()) report.target_accuracy = spec.target_accuracy();
  if (absl::Status st = CheckSetup(setup); !st.ok()) return st;
  return setup;
}

proto::TrainingSpec TrainingSpecOf(const TrainingSetup& setup) {
  proto::TrainingSpec spec;
  spec.set_sync(setup.sync);
  spec.set_workers(static_cast<std::uint32_t>(setup.workers));
  spec.set_servers(static_cast<std::uint32_t>(setup.servers));
  for (int width : setup.train.hidden) spec.add_hidden(width);
  spec.set_batch(static_cast<std::uint32_t>(setup.train.batch));
  spec.set_optimizer(setup.train.optimizer);
  spec.set_learning_rate(setup.train.learning_rate);
  spec.set_momentum(setup.train.momentum);
  spec.set_epochs(static_cast<std::uint32_t>(setup.train.epochs));
  spec.set_steps(static_cast<std::uint64_t>(setup.train.steps));
  spec.set_seed(setup.train.seed);
  spec.set_bucket_bytes(setup.bucket_bytes);
  spec.set_overlap(setup.overlap);
  *spec.mutable_compression() = ToProto(setup.compression);
  if (setup.ps_mode) *spec.mutable_ps_mode() = ToProto(*setup.ps_mode);
  spec.set_lr_scaling(setup.train.lr_scaling);
  spec.set_warmup_steps(static_cast<std::uint64_t>(setup.train.warmup_steps));
  spec.set_report_every_steps(static_cast<std::uint64_t>(setup.report.every_steps));
  spec.set_train_accuracy_samples(static_cast<std::uint32_t>(setup.report.train_accuracy_samples));
  spec.set_target_accuracy(setup.report.target_accuracy);
  return spec;
}

proto::TrainingRow TrainingHeader(const TrainingSetup& setup, const Dataset& train,
                                  const std::string& deployment) {
  proto::TrainingRow header;
  header.set_sync(setup.sync);
  header.set_workers(static_cast<std::uint32_t>(setup.workers));
  header.set_deployment(deployment);
  if (RunsOnParameterServer(setup.sync)) {
    header.set_servers(static_cast<std::uint32_t>(setup.servers));
    header.set_ps_mode(setup.ps_mode.value_or(PsMode{}).Name());
  }
  const std::vector<int> layers = WorkerTrainer::LayerSizes(setup.train, train);
  for (int size : layers) header.add_layer_sizes(size);
  header.set_parameters(Mlp(layers).parameter_count());
  header.set_compress(setup.compression.Name());
  header.set_dense_gradient_bytes(4 * static_cast<std::uint64_t>(header.parameters()));
  header.set_lr_scaling(EnumText(setup.train.lr_scaling));
  header.set_warmup_steps(static_cast<std::uint32_t>(setup.train.warmup_steps));
  header.set_batch_per_worker(static_cast<std::uint32_t>(setup.train.batch));
  header.set_optimizer(setup.train.optimizer);
  header.set_learning_rate(setup.train.learning_rate);
  header.set_seed(setup.train.seed);
  header.set_bucket_bytes(setup.bucket_bytes);
  header.set_overlap(setup.overlap);
  return header;
}

absl::Status TrainRank(const TrainingSetup& setup, const TrainTestSplit& data, int rank,
                       const proto::TrainingRow& header, const SyncFactory& make_sync,
                       const TrainingRowSink& sink) {
  if (std::int64_t{setup.workers} * setup.train.batch > data.train.samples()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the global batch (workers x batch = ", setup.workers * setup.train.batch,
                     ") is larger than the training set (", data.train.samples(), " samples)"));
  }
  WorkerTrainer trainer(setup.train, data.train, rank, setup.workers);
  absl::StatusOr<std::unique_ptr<GradientSync>> sync = make_sync(trainer);
  if (!sync.ok()) return sync.status();
  return RunTraining(trainer, **sync, data.train, rank == 0 ? &data.test : nullptr, setup.report,
                     header, sink);
}

absl::StatusOr<std::unique_ptr<GradientSync>> MakeAllReduceSync(const TrainingSetup& setup,
                                                                 Transport& transport,
                                                                 std::int64_t parameters) {
  const Collective* collective = FindCollective(setup.sync, Kinds::kScheduledAllReduce);
  if (collective == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("'", setup.sync, "' is no scheduled all-reduce"));
  }
  absl::StatusOr<proto::Optimizer> optimizer = TrainingOptimizer(setup.train, setup.workers);
  if (!optimizer.ok()) return optimizer.status();
  absl::StatusOr<std::unique_ptr<AllReduceSync>> sync =
      AllReduceSync::Create(*collective, transport, parameters, setup.bucket_bytes, *optimizer,
                            setup.overlap, setup.compression);
  if (!sync.ok()) return sync.status();
  return std::unique_ptr<GradientSync>(*std::move(sync));
}

absl::StatusOr<std::unique_ptr<GradientSync>> MakePsSync(const TrainingSetup& setup,
                                                         PsClient& client, std::string tensor,
                                                         int rank,
                                                         std::span<const float> initial) {
  absl::StatusOr<proto::Optimizer> optimizer = TrainingOptimizer(setup.train, setup.workers);
  if (!optimizer.ok()) return optimizer.status();
  absl::StatusOr<std::unique_ptr<PsSync>> sync =
      PsSync::Create(client, std::move(tensor), static_cast<std::uint32_t>(rank), setup.workers,
                     initial, *optimizer, setup.compression, setup.ps_mode.value_or(PsMode{}),
                     PsBuckets{.bytes = setup.bucket_bytes, .overlap = setup.overlap});
  if (!sync.ok()) return sync.status();
  return std::unique_ptr<GradientSync>(*std::move(sync));
}

}  // namespace testbed
