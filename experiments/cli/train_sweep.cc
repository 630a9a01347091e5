#include "experiments/cli/train_sweep.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/link_units.h"
#include "experiments/cli/train_output.h"
#include "proto/training_spec.h"
#include "allreduce/collective.h"

namespace testbed {
namespace {

// The sweep's worker counts, ascending and each once: worker_counts, else
// the spec's own workers (or their default).
std::vector<std::uint32_t> WorkerCountsAscending(const proto::TrainingSpec& spec) {
  std::vector<std::uint32_t> counts(spec.worker_counts().begin(), spec.worker_counts().end());
  if (counts.empty()) {
    counts.push_back(spec.workers() ? spec.workers()
                                    : static_cast<std::uint32_t>(kDefaultTrainingWorkers));
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

// `one` (its workers set) as `scheme` says: its sync, servers (ps: one shard
// per worker unless it says), buckets, overlap, compression and ps mode. Returns the scheme's
// name for the rows (its sync where it has none).
std::string ApplyScheme(const proto::TrainingScheme& scheme, proto::TrainingSpec& one) {
  const std::uint32_t n = one.workers();
  if (!scheme.sync().empty()) one.set_sync(scheme.sync());
  const std::string sync = one.sync().empty() ? kDefaultTrainingSync : one.sync();
  const std::uint32_t default_servers =
      RunsOnParameterServer(sync) ? n : static_cast<std::uint32_t>(kDefaultTrainingServers);
  one.set_servers(scheme.servers() ? scheme.servers() : default_servers);
  one.set_bucket_bytes(scheme.bucket_bytes());
  one.set_overlap(scheme.overlap());
  *one.mutable_compression() = scheme.compression();
  if (scheme.has_ps_mode()) {
    *one.mutable_ps_mode() = scheme.ps_mode();
  } else {
    one.clear_ps_mode();
  }
  return scheme.name().empty() ? sync : scheme.name();
}

// The runs of a sweep that differ only in N: their scaling is against the
// group's N = 1.
std::string ScalingGroup(const TrainingRun& run) {
  return absl::StrCat(run.spec.link_rate_bps(), "/", run.model, "/", run.scheme);
}

// "N = 8, scheme ring+fp16, model large, link 100mbit": which run of a sweep.
std::string RunName(const TrainingRun& run) {
  const proto::TrainingSpec& one = run.spec;
  return absl::StrCat("N = ", one.workers(), run.scheme.empty() ? "" : ", scheme ", run.scheme,
                      run.model.empty() ? "" : ", model ", run.model,
                      one.link_rate_bps() == 0 ? "" : ", link ",
                      one.link_rate_bps() == 0 ? "" : FormatLinkRate(one.link_rate_bps()));
}

// Before each run of a sweep: which one it is.
void AnnounceRun(const TrainingRun& run, std::ostream& err) {
  err << "testbed train: " << RunName(run) << std::endl;
}

// Trains `run` through `run_one`; each row labelled with the run's scheme
// and model, scaled against `one_worker` (the group's N = 1 RUN row, if any),
// shown and written. `summary` is the run's RUN row.
absl::Status TrainOneRun(const TrainingRun& run, const RunOneTraining& run_one,
                         const proto::TrainingRow* one_worker, std::ostream* jsonl,
                         std::ostream& err, proto::TrainingRow& summary) {
  const TrainingRowSink sink = [&](const proto::TrainingRow& measured) {
    proto::TrainingRow row = measured;
    row.set_scheme(run.scheme);
    row.set_model(run.model);
    if (row.kind() == proto::TrainingRow::PROGRESS) err << ProgressLine(row) << std::endl;
    if (row.kind() == proto::TrainingRow::RUN) {
      if (one_worker != nullptr) SetScaling(*one_worker, row);
      summary = row;
    }
    if (jsonl != nullptr) WriteJsonLine(row, *jsonl);
  };
  return run_one(run.spec, sink);
}

}  // namespace

std::vector<TrainingRun> ExpandTrainingSpec(const proto::TrainingSpec& spec) {
  const std::vector<std::uint32_t> counts = WorkerCountsAscending(spec);
  std::vector<std::uint64_t> rates(spec.link_rates_bps().begin(), spec.link_rates_bps().end());
  if (rates.empty()) rates.push_back(spec.link_rate_bps());
  std::vector<proto::TrainingModel> models(spec.models().begin(), spec.models().end());
  if (models.empty()) models.emplace_back();  // the spec's own hidden layers
  std::vector<proto::TrainingScheme> schemes(spec.schemes().begin(), spec.schemes().end());
  const bool own_scheme = schemes.empty();
  if (own_scheme) schemes.emplace_back();

  proto::TrainingSpec base = spec;
  base.clear_worker_counts();
  base.clear_link_rates_bps();
  base.clear_models();
  base.clear_schemes();
  std::vector<TrainingRun> runs;
  for (const std::uint64_t rate : rates) {
    for (const proto::TrainingModel& model : models) {
      for (const proto::TrainingScheme& scheme : schemes) {
        for (std::uint32_t n : counts) {
          TrainingRun run{base, "", model.name()};
          run.spec.set_workers(n);
          run.spec.set_link_rate_bps(rate);
          if (model.hidden_size() > 0) *run.spec.mutable_hidden() = model.hidden();
          if (!own_scheme) run.scheme = ApplyScheme(scheme, run.spec);
          runs.push_back(std::move(run));
        }
      }
    }
  }
  return runs;
}

void SetScaling(const proto::TrainingRow& one_worker, proto::TrainingRow& row) {
  if (one_worker.samples_per_second() <= 0 || row.samples_per_second() <= 0) return;
  row.set_speedup(row.samples_per_second() / one_worker.samples_per_second());
  row.set_scaling_efficiency(row.speedup() / row.workers());
}

absl::Status RunTrainingSweep(const std::vector<TrainingRun>& runs, const RunOneTraining& run_one,
                              std::ostream* jsonl, std::ostream& out, std::ostream& err) {
  // N = 1's RUN row of each scaling group: the yardstick of the others.
  std::map<std::string, proto::TrainingRow> one_worker;
  std::vector<proto::TrainingRow> summaries;
  absl::Status first_failure;
  std::vector<std::string> failed;
  for (const TrainingRun& run : runs) {
    if (runs.size() > 1) AnnounceRun(run, err);
    const std::string group = ScalingGroup(run);
    const auto yardstick = one_worker.find(group);
    proto::TrainingRow summary;
    const absl::Status status =
        TrainOneRun(run, run_one, yardstick == one_worker.end() ? nullptr : &yardstick->second,
                    jsonl, err, summary);
    if (!status.ok()) {
      err << "testbed train: N = " << run.spec.workers() << ": " << status.message() << "\n";
      // A sweep goes on: one failed run of ninety-six should not cost the
      // other ninety-five (each run starts on fresh daemons).
      if (first_failure.ok()) first_failure = status;
      failed.push_back(RunName(run));
      continue;
    }
    if (run.spec.workers() == 1) one_worker[group] = summary;
    out << SummaryLine(summary) << "\n";
    summaries.push_back(summary);
  }
  if (!one_worker.empty() && summaries.size() > 1) PrintScaling(summaries, out);
  if (!failed.empty() && runs.size() > 1) {
    err << "testbed train: " << failed.size() << " of " << runs.size()
        << " runs failed: " << absl::StrJoin(failed, "; ") << "\n";
  }
  return first_failure;
}

}  // namespace testbed
