#include "experiments/cli/train_flags.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/link_units.h"
#include "experiments/cli/cli_common.h"
#include "experiments/cli/setting_flags.h"
#include "experiments/cli/spec_file.h"
#include "experiments/cli/train_sweep.h"
#include "worker/train/compression.h"
#include "worker/train/ps_sync.h"

namespace testbed {
namespace {

std::string DeploymentHelp() {
  return "local: the ranks as threads of this process over UCX on loopback (all-reduce) or "
         "gRPC to --servers testbed-server daemons started for the run (ps); with --network "
         "loopback or netns, as testbed-worker daemons started for the run. run: on daemons "
         "already deployed, through --coordinator (TESTBED_JOB_ID and TESTBED_TOKEN must "
         "match theirs)";
}

// The flags come in groups, added in the order --help lists them.

// The spec file, and where and how the ranks run: the deployment, the
// daemons' network, the coordinator, the waits, the logs, TLS.
void AddDeploymentFlags(CLI::App& cmd, TrainOptions& options) {
  cmd.add_option("--deployment", options.deployment, DeploymentHelp())
      ->check(CLI::IsMember({"local", "run"}))
      ->capture_default_str();
  cmd.add_option("--spec", options.spec_file,
                 "A TrainingSpec in text format (proto/training.proto); flags beside it "
                 "override its fields, and its sweep axes run as their cross-product");
  // The shared declarations, with what training does without --network.
  CLI::Option* network = AddNetworkFlag(cmd, options.network);
  network->description(network->get_description() +
                       "; local only, the ranks as testbed-worker daemons there (without it, "
                       "threads of this process)");
  network->default_str("");
  AddLinkRateFlag(cmd, options.link_rate_bps);
  cmd.add_option("-c,--coordinator", options.coordinator, "run: the coordinator's HOST:PORT");
  cmd.add_option("--wait-for-workers", options.wait_for_workers_s,
                 "run: seconds the coordinator waits for N workers to attach")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd.add_option("--timeout", options.timeout_s,
                 "Seconds a rank waits for one synchronisation before giving up (0: 120)")
      ->check(CLI::Range(0, 86400));
  AddLogDirFlag(cmd, options.log_dir);
  AddTlsFlags(cmd, options.tls);
}

// How many workers, and how their gradients are synchronised: the scheme,
// the parameter server's consistency and shards.
void AddSyncFlags(CLI::App& cmd, TrainOptions& options) {
  cmd.add_option("-n,--workers", options.workers,
                 "Number of workers N; a list (1,2,4) trains once per N, and with N = 1 in it "
                 "each run's row carries its speed-up and scaling efficiency against one worker")
      ->delimiter(',')
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd.add_option("--sync", options.run.sync, "How gradients are synchronised")
      ->check(CollectiveValidator(Kinds::kAllReduce))
      ->capture_default_str();
  AddParsedOption(cmd, "--ps-mode",
                  "ps: sync (step t of every worker before anyone's t+1), async (the shards apply "
                  "each push as it arrives; nobody waits) or ssp:K (bounded staleness: no worker "
                  "more than K steps ahead of the slowest) [default: sync]",
                  "MODE", StoreParsed(&ParsePsMode, options.run.ps_mode));
  AddServersFlag(cmd, options.run.servers);
}

// The model and how it is trained: its layers, the batch, the optimiser,
// how long, the seed.
void AddModelFlags(CLI::App& cmd, TrainConfig& train) {
  cmd.add_option("--hidden", train.hidden, "Hidden layer widths, comma-separated (e.g. 256,256)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd.add_option("-B,--batch", train.batch, "Batch per worker B (global: N * B)")
      ->check(CLI::Range(1, 60000))
      ->capture_default_str();
  cmd.add_option("--lr", train.learning_rate, "Learning rate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--optimizer", train.optimizer, "sgd, momentum or adam")
      ->check(CLI::IsMember({"sgd", "momentum", "adam"}))
      ->capture_default_str();
  cmd.add_option("--momentum", train.momentum, "Momentum's mu")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd.add_option("--epochs", train.epochs, "Epochs to train")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd.add_option("--steps", train.steps, "Steps to train, instead of --epochs")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  cmd.add_option("--seed", train.seed, "Seed of the initial parameters and of the samples' order")
      ->capture_default_str();
}

// What a step does beyond computing and syncing its gradient: buckets and
// compression, the learning rate's scaling and warm-up, overlap.
void AddStepFlags(CLI::App& cmd, TrainOptions& options) {
  cmd.add_option("--bucket-mb", options.bucket_mb,
                 "Synchronise the gradient in buckets of this many MiB, each its own all-reduce "
                 "or, with ps, its own tensor on the shards (0: one bucket)")
      ->check(CLI::Range(0.0, 4096.0))
      ->capture_default_str();
  AddParsedOption(cmd, "--compress",
                  "Gradient compression: none, fp16 (IEEE half) or topk:RATIO (that fraction of "
                  "the elements, largest first, with error feedback)",
                  "KIND", StoreParsed(&ParseCompression, options.run.compression))
      ->default_str(options.run.compression.Name());
  AddEnumFlag(cmd, "--lr-scaling", options.run.train.lr_scaling,
              "The learning rate's scaling with N; linear: the rate times N (the global batch "
              "is N * B)");
  cmd.add_option("--warmup-steps", options.run.train.warmup_steps,
                 "Ramp the learning rate up linearly over this many steps (sgd, momentum)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40))
      ->capture_default_str();
  cmd.add_flag("--overlap", options.run.overlap,
               "Synchronise each bucket (its all-reduce, or its ps push and pull) on a "
               "communication thread as soon as backpropagation has finished it (use with "
               "--bucket-mb)");
}

// What is measured and where it goes: progress rows, the target accuracy,
// the data, the JSON lines.
void AddReportFlags(CLI::App& cmd, TrainOptions& options) {
  cmd.add_option("--report-every", options.run.report.every_steps,
                 "Steps between progress rows (0: once per epoch)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--target-accuracy", options.run.report.target_accuracy,
                 "Test accuracy for the run's time to accuracy")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd.add_option("--data-dir", options.data_dir,
                 "Folder of the Fashion-MNIST IDX files (default: Debian's)");
  cmd.add_option("-o,--out", options.out, "Write every row as a JSON line to this file");
}

// Which flags count over the spec: without a spec file every flag (with its
// default); with one, only the flags typed.
class FlagsOverSpec {
 public:
  explicit FlagsOverSpec(const TrainOptions& options)
      : command_(options.command), from_file_(!options.spec_file.empty()) {}

  bool typed(const char* flag) const { return command_ != nullptr && command_->count(flag) > 0; }
  bool given(const char* flag) const { return !from_file_ || typed(flag); }

 private:
  const CLI::App* command_;  // null: nothing typed (a caller that parsed no command line)
  bool from_file_;
};

// The flags that name a sweep axis's value. A flag typed beside a spec with
// the matching sweep axis replaces the axis too: -n 2, --link-rate, --hidden
// and --sync run that one value.
void ApplyAxisFlags(const TrainOptions& options, const FlagsOverSpec& flags,
                    proto::TrainingSpec& spec) {
  if (flags.given("--workers")) {
    spec.set_workers(static_cast<std::uint32_t>(options.workers.front()));
    spec.clear_worker_counts();
    if (options.workers.size() > 1) {
      for (int n : options.workers) spec.add_worker_counts(static_cast<std::uint32_t>(n));
    }
  }
  if (flags.given("--sync")) {
    spec.set_sync(options.run.sync);
    if (flags.typed("--sync")) spec.clear_schemes();
  }
  if (flags.given("--hidden")) {
    if (flags.typed("--hidden")) spec.clear_models();
    spec.clear_hidden();
    for (int width : options.run.train.hidden) spec.add_hidden(width);
  }
  if (flags.given("--link-rate")) {
    spec.set_link_rate_bps(options.link_rate_bps);
    if (flags.typed("--link-rate")) spec.clear_link_rates_bps();
  }
}

// Every other flag that is a field of the spec.
void ApplyFieldFlags(const TrainOptions& options, const FlagsOverSpec& flags,
                     proto::TrainingSpec& spec) {
  const LocalTrainingOptions& run = options.run;
  if (flags.given("--servers")) spec.set_servers(static_cast<std::uint32_t>(run.servers));
  // A ps mode and a network are set only where said: unset, they mean
  // synchronous and threads.
  if (flags.typed("--ps-mode") && run.ps_mode) *spec.mutable_ps_mode() = ToProto(*run.ps_mode);
  if (flags.typed("--network")) spec.set_network(options.network);
  if (flags.given("--batch")) spec.set_batch(static_cast<std::uint32_t>(run.train.batch));
  if (flags.given("--lr")) spec.set_learning_rate(run.train.learning_rate);
  if (flags.given("--optimizer")) spec.set_optimizer(run.train.optimizer);
  if (flags.given("--momentum")) spec.set_momentum(run.train.momentum);
  if (flags.given("--epochs")) spec.set_epochs(static_cast<std::uint32_t>(run.train.epochs));
  if (flags.given("--steps")) spec.set_steps(static_cast<std::uint64_t>(run.train.steps));
  if (flags.given("--seed")) spec.set_seed(run.train.seed);
  if (flags.given("--bucket-mb")) {
    spec.set_bucket_bytes(static_cast<std::uint64_t>(options.bucket_mb * (1 << 20)));
  }
  if (flags.given("--compress")) *spec.mutable_compression() = ToProto(run.compression);
  if (flags.given("--lr-scaling")) spec.set_lr_scaling(run.train.lr_scaling);
  if (flags.given("--warmup-steps")) {
    spec.set_warmup_steps(static_cast<std::uint64_t>(run.train.warmup_steps));
  }
  if (flags.given("--overlap")) spec.set_overlap(run.overlap);
  if (flags.given("--report-every")) {
    spec.set_report_every_steps(static_cast<std::uint64_t>(run.report.every_steps));
  }
  if (flags.given("--target-accuracy")) spec.set_target_accuracy(run.report.target_accuracy);
  if (flags.given("--data-dir") && !options.data_dir.empty()) spec.set_data_dir(options.data_dir);
  if (flags.given("--timeout")) {
    spec.set_timeout_s(static_cast<std::uint32_t>(options.timeout_s));
  }
}

// Where the spec puts its ranks: a known network, link rates only on the
// emulated cluster and each one readable, a deployment that fits.
absl::Status CheckPlacement(const TrainOptions& options, const proto::TrainingSpec& spec) {
  if (spec.has_network() && !proto::Network::Kind_IsValid(spec.network())) {
    return absl::InvalidArgumentError(absl::StrCat("unknown network ", spec.network()));
  }
  if ((spec.link_rate_bps() != 0 || spec.link_rates_bps_size() > 0) &&
      spec.network() != proto::Network::netns) {
    return absl::InvalidArgumentError("--link-rate needs --network netns (the emulated cluster)");
  }
  if (options.deployment == "run" && spec.has_network()) {
    return absl::InvalidArgumentError(
        "--network places the daemons of --deployment local; --deployment run uses the "
        "daemons already running");
  }
  if (options.deployment == "run" && options.coordinator.empty()) {
    return absl::InvalidArgumentError("--deployment run needs --coordinator HOST:PORT");
  }
  return absl::OkStatus();
}

// Every run of the sweep is checked before the first starts, so a bad
// scheme late in a sweep costs no run.
absl::Status CheckEveryRun(const proto::TrainingSpec& spec) {
  for (const TrainingRun& one : ExpandTrainingSpec(spec)) {
    absl::StatusOr<TrainingSetup> setup = TrainingSetupFromSpec(one.spec);
    if (!setup.ok()) {
      return absl::Status(setup.status().code(),
                          absl::StrCat(one.scheme.empty() ? "" : "scheme " + one.scheme + ": ",
                                       setup.status().message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

CLI::App* AddTrainCommand(CLI::App& app, TrainOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Data-parallel training of an MLP on Fashion-MNIST, synchronised through the parameter "
      "server or an all-reduce; measures loss, accuracy and step time (compute and "
      "communication)");
  options.command = cmd;
  AddDeploymentFlags(*cmd, options);
  AddSyncFlags(*cmd, options);
  AddModelFlags(*cmd, options.run.train);
  AddStepFlags(*cmd, options);
  AddReportFlags(*cmd, options);
  return cmd;
}

absl::StatusOr<proto::TrainingSpec> BuildTrainingSpec(const TrainOptions& options) {
  proto::TrainingSpec spec;
  if (!options.spec_file.empty()) {
    if (absl::Status st = ReadSpecFileInto(options.spec_file, spec, "training spec"); !st.ok()) {
      return st;
    }
  }
  const FlagsOverSpec flags(options);
  ApplyAxisFlags(options, flags, spec);
  ApplyFieldFlags(options, flags, spec);
  if (absl::Status st = CheckPlacement(options, spec); !st.ok()) return st;
  if (absl::Status st = CheckEveryRun(spec); !st.ok()) return st;
  return spec;
}

}  // namespace testbed
