#include "experiments/cli/train_command.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "experiments/cli/cli_common.h"
#include "worker/train/compression.h"
#include "worker/train/dataset.h"

namespace testbed {
namespace {

std::string ProgressLine(const proto::TrainingRow& row) {
  return absl::StrFormat(
      "train: epoch %.2f step %d: loss %.4f, train %.2f%%, test %.2f%%; step %.2f ms "
      "(compute %.2f, exposed communication %.2f, hidden %.2f), %d payload bytes per step "
      "(gradient %d, %s)",
      row.epoch(), row.step(), row.loss(), 100 * row.train_accuracy(), 100 * row.test_accuracy(),
      1e3 * row.step_seconds(), 1e3 * row.compute_seconds(), 1e3 * row.communication_seconds(),
      1e3 * row.overlapped_communication_seconds(), row.payload_bytes(),
      row.dense_gradient_bytes(), row.compress());
}

std::string SummaryLine(const proto::TrainingRow& row) {
  std::string target = row.has_time_to_target_seconds()
                           ? absl::StrFormat("%.2f s", row.time_to_target_seconds())
                           : std::string("not reached");
  return absl::StrFormat(
      "%s, N = %d, %d parameters: test accuracy %.2f%% after %d steps, %.0f samples/s, "
      "step %.2f ms (compute %.2f, exposed communication %.2f, hidden %.2f), time to %.0f%%: %s",
      row.sync(), row.workers(), row.parameters(), 100 * row.test_accuracy(), row.step(),
      row.samples_per_second(), 1e3 * row.step_seconds(), 1e3 * row.compute_seconds(),
      1e3 * row.communication_seconds(), 1e3 * row.overlapped_communication_seconds(),
      100 * row.target_accuracy(), target);
}

// The sweep's scaling against N = 1, and where this machine's cores, not the
// scheme, decide it.
void PrintScaling(const std::vector<proto::TrainingRow>& runs, std::ostream& out) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  out << "scaling against one worker (samples/s with a fixed batch per worker):\n";
  for (const proto::TrainingRow& row : runs) {
    out << absl::StrFormat("  N = %d: %.0f samples/s", row.workers(), row.samples_per_second());
    if (row.has_speedup()) {
      out << absl::StrFormat(", speed-up %.2f, scaling efficiency %.0f%%", row.speedup(),
                             100 * row.scaling_efficiency());
    }
    if (row.workers() > cores) out << " (more workers than this machine's " << cores << " cores)";
    out << "\n";
  }
}

}  // namespace

void SetScaling(const proto::TrainingRow& one_worker, proto::TrainingRow& row) {
  if (one_worker.samples_per_second() <= 0 || row.samples_per_second() <= 0) return;
  row.set_speedup(row.samples_per_second() / one_worker.samples_per_second());
  row.set_scaling_efficiency(row.speedup() / row.workers());
}

CLI::App* AddTrainCommand(CLI::App& app, TrainOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Data-parallel training of an MLP on Fashion-MNIST, synchronised through the parameter "
      "server or an all-reduce; measures loss, accuracy and step time (compute and "
      "communication)");
  cmd->add_option("--deployment", options.deployment,
                  "local: N workers as threads of this process, over UCX on loopback (all-reduce) "
                  "or gRPC to --servers testbed-server daemons started for the run (ps)")
      ->check(CLI::IsMember({"local"}))
      ->capture_default_str();
  cmd->add_option("-n,--workers", options.workers,
                  "Number of workers N; a list (1,2,4) trains once per N, and with N = 1 in it "
                  "each run's row carries its speed-up and scaling efficiency against one worker")
      ->delimiter(',')
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--sync", options.run.sync, "How gradients are synchronised")
      ->check(CollectiveValidator(Kinds::kAllReduce))
      ->capture_default_str();
  cmd->add_option("--servers", options.run.servers,
                  "ps: parameter-server shards S, each a testbed-server daemon (the first is "
                  "the coordinator)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--hidden", options.run.train.hidden,
                  "Hidden layer widths, comma-separated (e.g. 256,256)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("-B,--batch", options.run.train.batch, "Batch per worker B (global: N * B)")
      ->check(CLI::Range(1, 60000))
      ->capture_default_str();
  cmd->add_option("--lr", options.run.train.learning_rate, "Learning rate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--optimizer", options.run.train.optimizer, "sgd, momentum or adam")
      ->check(CLI::IsMember({"sgd", "momentum", "adam"}))
      ->capture_default_str();
  cmd->add_option("--momentum", options.run.train.momentum, "Momentum's mu")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--epochs", options.run.train.epochs, "Epochs to train")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--steps", options.run.train.steps, "Steps to train, instead of --epochs")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  cmd->add_option("--seed", options.run.train.seed,
                  "Seed of the initial parameters and of the samples' order")
      ->capture_default_str();
  cmd->add_option("--bucket-mb", options.bucket_mb,
                  "All-reduce the gradient in buckets of this many MiB (0: one bucket)")
      ->check(CLI::Range(0.0, 4096.0))
      ->capture_default_str();
  cmd->add_option("--compress", options.run.compress,
                  "Gradient compression: none, fp16 (IEEE half) or topk:RATIO (that fraction of "
                  "the elements, largest first, with error feedback)")
      ->check([](const std::string& text) {
        absl::StatusOr<CompressionConfig> parsed = ParseCompression(text);
        return parsed.ok() ? std::string() : std::string(parsed.status().message());
      })
      ->capture_default_str();
  cmd->add_option("--lr-scaling", options.run.train.lr_scaling,
                  "none, or linear: the learning rate times N (the global batch is N * B)")
      ->check(CLI::IsMember({"none", "linear"}))
      ->capture_default_str();
  cmd->add_option("--warmup-steps", options.run.train.warmup_steps,
                  "Ramp the learning rate up linearly over this many steps (sgd, momentum)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_flag("--overlap", options.run.overlap,
               "All-reduce each bucket on a communication thread as soon as backpropagation "
               "has finished it (use with --bucket-mb)");
  cmd->add_option("--report-every", options.run.report.every_steps,
                  "Steps between progress rows (0: once per epoch)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--target-accuracy", options.run.report.target_accuracy,
                  "Test accuracy for the run's time to accuracy")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--data-dir", options.data_dir,
                  "Folder of the Fashion-MNIST IDX files (default: Debian's)");
  cmd->add_option("-o,--out", options.out, "Write every row as a JSON line to this file");
  return cmd;
}

int RunTrain(const TrainOptions& options, std::ostream& out, std::ostream& err) {
  std::ofstream jsonl;
  if (!options.out.empty()) {
    jsonl.open(options.out);
    if (!jsonl) {
      err << "testbed train: cannot write " << options.out << "\n";
      return 1;
    }
  }
  absl::StatusOr<TrainTestSplit> data =
      LoadFashionMnist(options.data_dir.empty() ? kFashionMnistDir : options.data_dir);
  if (!data.ok()) {
    err << "testbed train: " << data.status().message() << "\n";
    return 1;
  }
  LocalTrainingOptions run = options.run;
  run.bucket_bytes = static_cast<std::size_t>(options.bucket_mb * (1 << 20));

  google::protobuf::util::JsonPrintOptions json;
  json.preserve_proto_field_names = true;
  json.always_print_primitive_fields = true;
  std::vector<int> counts = options.workers;
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  std::optional<proto::TrainingRow> one_worker;  // N = 1's RUN row: the sweep's yardstick
  std::vector<proto::TrainingRow> summaries;
  for (const int n : counts) {
    run.workers = n;
    proto::TrainingRow summary;
    absl::Status status = RunLocalTraining(run, *data, [&](const proto::TrainingRow& measured) {
      proto::TrainingRow row = measured;
      if (row.kind() == proto::TrainingRow::PROGRESS) err << ProgressLine(row) << std::endl;
      if (row.kind() == proto::TrainingRow::RUN) {
        if (one_worker) SetScaling(*one_worker, row);
        summary = row;
      }
      if (jsonl.is_open()) {
        std::string line;
        (void)google::protobuf::util::MessageToJsonString(row, &line, json);
        jsonl << line << "\n" << std::flush;
      }
    });
    if (!status.ok()) {
      err << "testbed train: N = " << n << ": " << status.message() << "\n";
      return 1;
    }
    if (n == 1) one_worker = summary;
    out << SummaryLine(summary) << "\n";
    summaries.push_back(summary);
  }
  if (one_worker && summaries.size() > 1) PrintScaling(summaries, out);
  return 0;
}

}  // namespace testbed
