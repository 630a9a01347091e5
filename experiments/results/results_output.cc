#include "experiments/results/results_output.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <thread>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "experiments/results/result_row.h"
#include "testbed_git_revision.h"  // generated at build time

namespace testbed {

std::vector<std::string> TableColumns(const std::vector<proto::ResultRow>& rows) {
  const auto any = [&](auto has) { return std::any_of(rows.begin(), rows.end(), has); };
  const bool any_ps = any([](const proto::ResultRow& r) { return r.servers() > 0; });
  const bool any_wire = any([](const proto::ResultRow& r) { return r.wire_bytes_sent_size() > 0; });
  const bool any_model = any([](const proto::ResultRow& r) { return r.has_model_time_us(); });
  const bool any_segment = any([](const proto::ResultRow& r) { return r.segment_bytes() > 0; });
  const bool any_chosen = any([](const proto::ResultRow& r) { return !r.chosen_by().empty(); });
  const bool any_device = any([](const proto::ResultRow& r) {
    return !r.memory().empty() && r.memory() != "host";
  });
  const bool any_split = any([](const proto::ResultRow& r) { return !r.split().empty(); });
  std::vector<std::string> columns = {"algorithm", "workers"};
  // A split's rows are its groups: which one, who is in it, what crossed racks.
  if (any_split) columns.insert(columns.end(), {"group", "group_ranks", "cross_rack_theory_bytes"});
  columns.insert(columns.end(), {"bytes", "time_us_avg"});
  if (any_model) columns.push_back("model_time_us");
  columns.insert(columns.end(), {"time_us_min", "time_us_p50", "time_us_p99", "time_us_max",
                                 "algbw_gbps", "busbw_gbps",
                                 "payload_bytes_total"});
  // What the network carried, between what the algorithm moved and the theory.
  // (ps: the workers' interfaces send the pushes and receive the pulls.)
  if (any_wire) columns.insert(columns.end(), {"wire_bytes_sent_total", "wire_bytes_received_total"});
  columns.insert(columns.end(), {"theory_bytes_total", "wrong"});
  if (any_ps) columns.insert(columns.end(), {"servers", "shard_payload_bytes"});
  if (any_segment) columns.push_back("segment_bytes");
  if (any_device) columns.insert(columns.end(), {"memory", "gpu_path", "staged_bytes_total"});
  columns.push_back("transport");
  if (any_chosen) columns.push_back("chosen_by");  // long: last
  return columns;
}

ResultsFile::~ResultsFile() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status ResultsFile::Write(const std::string& line) {
  // Flushed at once, so a crash keeps what was measured and a full disk is
  // an error now, not after the run.
  if (std::fputs(line.c_str(), file_) == EOF || std::fputc('\n', file_) == EOF ||
      std::fflush(file_) != 0) {
    const int error = errno;
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot write ", path_, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::Status ResultsFile::Open(const std::string& path, const proto::ExperimentSpec& spec,
                               const std::string& deployment) {
  path_ = path;
  file_ = std::fopen(path.c_str(), "a");
  if (file_ == nullptr) {
    const int error = errno;
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
  }
  std::string spec_json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(spec, &spec_json, options);
  utsname host{};
  uname(&host);
  char stamp[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return Write(absl::StrCat(
      "{\"record\": \"experiment\", \"started_at\": ", JsonString(stamp),
      ", \"testbed_version\": ", JsonString(TESTBED_VERSION),
      ", \"git_revision\": ", JsonString(TESTBED_GIT_REVISION),
      ", \"deployment\": ", JsonString(deployment), ", \"host\": {\"name\": ",
      JsonString(host.nodename), ", \"kernel\": ", JsonString(host.release),
      ", \"machine\": ", JsonString(host.machine),
      ", \"cpus\": ", std::thread::hardware_concurrency(), "}, \"spec\": ", spec_json, "}"));
}

absl::Status ResultsFile::Append(const proto::ResultRow& row) {
  return Write(ResultRecordJson(row));
}

}  // namespace testbed
