#include "experiments/cli/submission.h"

#include <fstream>
#include <functional>
#include <map>
#include <iostream>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "allreduce/cost_model.h"
#include "absl/strings/str_join.h"
#include "experiments/cli/auto_algorithms.h"
#include "experiments/cli/experiment_client.h"
#include "experiments/results/row_timeline.h"
#include "proto/fabric_spec.h"
#include "proto/spec.h"

namespace testbed {
namespace {

// The cost model a spec asks for: alpha and the link rate; none without a rate.
std::optional<LinkModel> SpecLinkModel(const proto::ExperimentSpec& spec) {
  if (spec.link_rate_bps() == 0) return std::nullopt;
  return LinkModel{ModelAlphaSeconds(spec), 8.0 / static_cast<double>(spec.link_rate_bps())};
}

}  // namespace

void AddModelTime(const proto::ExperimentSpec& spec, proto::ResultRow& row) {
  const std::optional<LinkModel> model = SpecLinkModel(spec);
  // The model is of one collective over the world; a group of a split shares
  // the links with the others, which the closed forms do not see.
  if (!model || !row.split().empty()) return;
  const LinkModel& link = *model;
  absl::StatusOr<CostEstimate> estimate = EstimateRow(row, link);
  const proto::Fabric& fabric = spec.fabric();
  const int n = static_cast<int>(row.workers());
  const Collective* collective = FindCollective(row.algorithm());
  const bool on_fabric = fabric.racks() > 1 || fabric.host_links_size() > 0 ||
                         fabric.server_placement() == proto::ServerPlacement::colocated;
  if (estimate.ok() && collective != nullptr && on_fabric &&
      ValidateFabric(fabric, n).ok()) {
    const Placement placement = PlacementOf(fabric, n);
    const LinkRates rates = LinkRatesOf(fabric, n, static_cast<double>(spec.link_rate_bps()));
    const std::int64_t element = ElementBytes(spec);
    estimate = collective->has_schedule()
                   ? EstimateOnFabric(*collective, n, row.bytes(), element, link.alpha_s,
                                      placement, rates)
                   : EstimateParameterServerOnFabric(n, static_cast<int>(spec.servers()),
                                                     row.bytes(), element, link.alpha_s,
                                                     placement, rates,
                                                     ServerSitesOf(fabric, static_cast<double>(
                                                                               spec.link_rate_bps())));
  }
  // Every collective waits for the latest rank to begin (slow_ranks).
  if (estimate.ok()) {
    row.set_model_time_us(estimate->time_s * 1e6 +
                          static_cast<double>(LongestRankDelayMicros(fabric)));
  }
}

std::string RandomHex(int bytes) {
  std::random_device random;
  std::string out;
  for (int i = 0; i < bytes; ++i) absl::StrAppend(&out, absl::Hex(random() & 0xff, absl::kZeroPad2));
  return out;
}

namespace {

// Submits `spec` so that Ctrl-C cancels it; `on_row` gets each row and the
// call's context (to cancel it too).
absl::Status SubmitCancellable(
    const proto::ExperimentSpec& spec, const SubmissionTarget& target, Interrupter& interrupter,
    const std::function<void(const proto::ResultRow&, grpc::ClientContext&)>& on_row) {
  grpc::ClientContext context;
  interrupter.SetCurrent(&context);
  const absl::Status status = SubmitExperiment(
      target.coordinator, target.credentials, target.tls, spec, target.wait_for_workers_s,
      context, [&](const proto::ResultRow& row) { on_row(row, context); }, std::cerr);
  interrupter.SetCurrent(nullptr);
  return status;
}

// Submits one spec and records its rows; a row of a size in `chosen_by` says
// why auto chose it. An error is returned as a status.
absl::Status SubmitOnce(const ExperimentFlags& flags, const proto::ExperimentSpec& spec,
                        const SubmissionTarget& target, Interrupter& interrupter, RowSink& sink,
                        const std::map<std::int64_t, std::string>& chosen_by) {
  ResultsFile results_file;
  if (!flags.out.empty()) {
    if (absl::Status st = results_file.Open(flags.out, spec, target.deployment); !st.ok()) {
      return st;
    }
  }
  absl::Status write_error;
  const auto record = [&](const proto::ResultRow& measured, grpc::ClientContext& context) {
    proto::ResultRow row = measured;
    AddModelTime(spec, row);
    if (target.annotate) target.annotate(row);
    if (auto it = chosen_by.find(row.bytes()); it != chosen_by.end()) {
      row.set_chosen_by(it->second);
    }
    sink.Add(row);
    if (!results_file.is_open() || !write_error.ok()) return;
    write_error = results_file.Append(row);
    // Measuring on with nowhere to keep the results only wastes the run.
    if (!write_error.ok()) context.TryCancel();
  };
  const absl::Status status = SubmitCancellable(spec, target, interrupter, record);
  return write_error.ok() ? status : write_error;
}

// The rows auto fits its candidates to: the --tuning files' (read before the
// daemons started), or a calibration run on the same daemons (neither printed
// nor recorded). `source` says which.
absl::StatusOr<std::vector<proto::ResultRow>> TuningRows(const Tuning& tuning,
                                                         const proto::ExperimentSpec& spec,
                                                         const SubmissionTarget& target,
                                                         Interrupter& interrupter,
                                                         std::string& source) {
  if (!tuning.source.empty()) {
    source = tuning.source;
    return tuning.rows;
  }
  source = "alpha-beta fitted to a calibration run";
  const proto::ExperimentSpec calibration = CalibrationSpec(spec);
  std::cerr << "testbed: auto: calibrating " << absl::StrJoin(calibration.algorithms(), ", ")
            << " at " << absl::StrJoin(calibration.sizes(), ", ") << " bytes" << std::endl;
  std::vector<proto::ResultRow> rows;
  const absl::Status status = SubmitCancellable(
      calibration, target, interrupter,
      [&](const proto::ResultRow& row, grpc::ClientContext&) { rows.push_back(row); });
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("auto's calibration run: ", status.message()));
  }
  return rows;
}

absl::Status SubmitWithAuto(const ExperimentFlags& flags, const proto::ExperimentSpec& spec,
                            const SubmissionTarget& target, const Tuning& tuning,
                            Interrupter& interrupter, RowSink& sink) {
  std::string source;
  absl::StatusOr<std::vector<proto::ResultRow>> rows =
      TuningRows(tuning, spec, target, interrupter, source);
  if (!rows.ok()) return rows.status();
  absl::StatusOr<std::vector<FittedAlgorithm>> fitted =
      FitCandidates(*rows, AutoCandidates(spec), spec, std::cerr);
  if (!fitted.ok()) return fitted.status();
  for (const FittedAlgorithm& f : *fitted) {
    std::cerr << "testbed: auto: " << f.algorithm << " alpha " << f.link.alpha_s * 1e6
              << " us, beta " << f.link.beta_s_per_byte * 1e9 << " ns/byte" << std::endl;
  }
  const std::vector<std::int64_t> sizes(spec.sizes().begin(), spec.sizes().end());
  absl::StatusOr<std::vector<AlgorithmChoice>> choices =
      ChooseAlgorithms(*fitted, static_cast<int>(spec.workers()),
                       static_cast<int>(spec.servers()), sizes, ElementBytes(spec));
  if (!choices.ok()) return choices.status();
  for (const AlgorithmChoice& choice : *choices) {
    std::cerr << "testbed: auto: " << choice.bytes << " bytes: " << DescribeChoice(choice, source)
              << std::endl;
  }
  for (const ResolvedSubmission& submission : ResolveAuto(spec, *choices, source)) {
    if (absl::Status st =
            SubmitOnce(flags, submission.spec, target, interrupter, sink, submission.chosen_by);
        !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tuning> ReadTuning(const ExperimentFlags& flags) {
  if (flags.tuning.empty()) return Tuning{};
  absl::StatusOr<std::vector<proto::ResultRow>> rows = ReadResultsFiles(flags.tuning, SpecReader::kCli);
  if (!rows.ok()) return rows.status();
  return Tuning{*std::move(rows),
                absl::StrCat("alpha-beta fitted to ", absl::StrJoin(flags.tuning, ", "))};
}

absl::Status SubmitAndRecord(const ExperimentFlags& flags, const proto::ExperimentSpec& spec,
                             const SubmissionTarget& target, const Tuning& tuning,
                             Interrupter& interrupter, RowSink& sink) {
  if (NamesAuto(spec)) return SubmitWithAuto(flags, spec, target, tuning, interrupter, sink);
  return SubmitOnce(flags, spec, target, interrupter, sink, {});
}

// Whether --out (if given) can be appended to; says why not. Checked before
// anything starts, so a typo costs no run.
bool CanWriteResults(const std::string& out) {
  if (out.empty()) return true;
  if (std::ofstream(out, std::ios::app)) return true;
  std::cerr << "error: cannot write " << out << "\n";
  return false;
}

// The exit code for a submission's status.
bool WriteTimelineIfAsked(const ExperimentFlags& flags, const proto::ExperimentSpec& spec,
                          const RowSink& sink, const std::string& about, std::ostream& err) {
  if (flags.timeline.empty()) return true;
  int rows = 0;
  if (absl::Status st = WriteRowTimelines(flags.timeline, spec, sink.rows(), about, &rows);
      !st.ok()) {
    err << "error: " << st.message() << "\n";
    return false;
  }
  err << "timeline (" << rows << " rows) written to " << flags.timeline << "\n";
  return true;
}

int ExitCode(const absl::Status& status, const Interrupter& interrupter) {
  if (interrupter.interrupted()) {
    std::cerr << "testbed: interrupted\n";
    return kInterrupted;
  }
  if (!status.ok()) {
    std::cerr << "error: experiment failed: " << status.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace testbed
