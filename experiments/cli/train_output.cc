#include "experiments/cli/train_output.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_format.h"

namespace testbed {

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
  const std::string scheme =
      row.scheme().empty() || row.scheme() == row.sync() ? "" : " (" + row.scheme() + ")";
  const std::string model = row.model().empty() ? "" : " (" + row.model() + ")";
  const std::string link = row.link_rate().empty() ? "" : ", " + row.link_rate();
  // The parameter server's consistency, where it is not the synchronous default.
  const std::string mode =
      row.ps_mode().empty() || row.ps_mode() == "sync" ? "" : " " + row.ps_mode();
  return absl::StrFormat(
      "%s%s%s, N = %d%s, %d parameters%s: test accuracy %.2f%% after %d steps, %.0f samples/s, "
      "step %.2f ms (compute %.2f, exposed communication %.2f, hidden %.2f), time to %.0f%%: %s",
      row.sync(), mode, scheme, row.workers(), link, row.parameters(), model,
      100 * row.test_accuracy(),
      row.step(),
      row.samples_per_second(), 1e3 * row.step_seconds(), 1e3 * row.compute_seconds(),
      1e3 * row.communication_seconds(), 1e3 * row.overlapped_communication_seconds(),
      100 * row.target_accuracy(), target);
}

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

void WriteJsonLine(const proto::TrainingRow& row, std::ostream& out) {
  google::protobuf::util::JsonPrintOptions json;
  json.preserve_proto_field_names = true;
  json.always_print_primitive_fields = true;
  std::string line;
  (void)google::protobuf::util::MessageToJsonString(row, &line, json);
  out << line << "\n" << std::flush;
}

}  // namespace testbed
