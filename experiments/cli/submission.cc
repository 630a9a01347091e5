#include "experiments/cli/submission.h"

#include <fstream>
#include <iostream>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "allreduce/cost_model.h"
#include "allreduce/data_type.h"
#include "common/link_units.h"
#include "experiments/cli/experiment_client.h"

namespace testbed {
namespace {

// The cost model a spec asks for: alpha and the link rate; none without a rate.
std::optional<LinkModel> SpecLinkModel(const proto::ExperimentSpec& spec) {
  if (spec.link_rate().empty()) return std::nullopt;
  const auto rate = ParseLinkRate(spec.link_rate());
  const auto alpha = ParseDuration(spec.model_alpha().empty() ? "0" : spec.model_alpha());
  if (!rate.ok() || !alpha.ok()) return std::nullopt;
  return LinkModel{*alpha, 8.0 / *rate};
}

void AddModelTime(const LinkModel& link, proto::ResultRow& row) {
  if (const auto estimate = EstimateRow(row, link); estimate.ok()) {
    row.set_model_time_us(estimate->time_s * 1e6);
  }
}

}  // namespace

std::string RandomHex(int bytes) {
  std::random_device random;
  std::string out;
  for (int i = 0; i < bytes; ++i) absl::StrAppend(&out, absl::Hex(random() & 0xff, absl::kZeroPad2));
  return out;
}

// Submits one spec and records its rows. An error is returned as a status.
absl::Status SubmitAndRecord(const ExperimentFlags& flags, const proto::ExperimentSpec& spec,
                             const std::string& coordinator, const Credentials& credentials,
                             const Tls& tls, int wait_for_workers_s, const std::string& deployment,
                             Interrupter& interrupter, RowSink& sink) {
  ResultsFile results_file;
  if (!flags.out.empty()) {
    if (absl::Status st = results_file.Open(flags.out, spec, deployment); !st.ok()) return st;
  }
  const std::optional<LinkModel> model = SpecLinkModel(spec);
  grpc::ClientContext context;
  interrupter.SetCurrent(&context);
  absl::Status write_error;
  const absl::Status status = SubmitExperiment(
      coordinator, credentials, tls, spec, wait_for_workers_s, context,
      [&](const proto::ResultRow& measured) {
        proto::ResultRow row = measured;
        if (model) AddModelTime(*model, row);
        sink.Add(row);
        if (!results_file.is_open() || !write_error.ok()) return;
        write_error = results_file.Append(row);
        // Measuring on with nowhere to keep the results only wastes the run.
        if (!write_error.ok()) context.TryCancel();
      },
      std::cerr);
  interrupter.SetCurrent(nullptr);
  return write_error.ok() ? status : write_error;
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
