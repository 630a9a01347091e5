#include "experiments/results_output.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <thread>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "testbed_git_revision.h"  // generated at build time

namespace testbed {

std::vector<std::string> ResultColumns() {
  return {"algorithm",   "workers",    "bytes",      "iterations",          "time_us_avg",
          "time_us_min", "time_us_max", "algbw_gbps", "busbw_gbps",          "payload_bytes_total",
          "theory_bytes_total", "max_rank_bytes", "rounds", "wrong", "dtype", "transport",
          "servers", "shard_payload_bytes", "shard_theory_bytes", "wire_bytes_sent_total",
          "wire_bytes_received_total", "wire_bytes_sent", "wire_bytes_received",
          "model_time_us"};
}

std::vector<std::string> TableColumns(bool any_ps, bool any_wire, bool any_model) {
  std::vector<std::string> columns = {"algorithm", "workers", "bytes", "time_us_avg"};
  if (any_model) columns.push_back("model_time_us");
  columns.insert(columns.end(), {"time_us_min", "time_us_max", "algbw_gbps", "busbw_gbps",
                                 "payload_bytes_total"});
  // What the network carried, between what the algorithm moved and the theory.
  // (ps: the workers' interfaces send the pushes and receive the pulls.)
  if (any_wire) columns.insert(columns.end(), {"wire_bytes_sent_total", "wire_bytes_received_total"});
  columns.insert(columns.end(), {"theory_bytes_total", "wrong"});
  if (any_ps) columns.insert(columns.end(), {"servers", "shard_payload_bytes"});
  columns.push_back("transport");
  return columns;
}

std::vector<Cell> ResultCells(const proto::ResultRow& r) {
  return {r.algorithm(),
          std::int64_t{r.workers()},
          r.bytes(),
          std::int64_t{r.iterations()},
          r.time_us_avg(),
          r.time_us_min(),
          r.time_us_max(),
          r.algbw_gbps(),
          r.busbw_gbps(),
          static_cast<std::int64_t>(r.payload_bytes_total()),
          static_cast<std::int64_t>(r.theory_bytes_total()),
          static_cast<std::int64_t>(r.max_rank_bytes()),
          std::int64_t{r.rounds()},
          r.wrong(),
          r.dtype(),
          r.transport(),
          std::int64_t{r.servers()},
          std::vector<std::int64_t>(r.shard_payload_bytes().begin(), r.shard_payload_bytes().end()),
          std::vector<std::int64_t>(r.shard_theory_bytes().begin(), r.shard_theory_bytes().end()),
          static_cast<std::int64_t>(r.wire_bytes_sent_total()),
          static_cast<std::int64_t>(r.wire_bytes_received_total()),
          std::vector<std::int64_t>(r.wire_bytes_sent().begin(), r.wire_bytes_sent().end()),
          std::vector<std::int64_t>(r.wire_bytes_received().begin(), r.wire_bytes_received().end()),
          r.has_model_time_us() ? Cell(r.model_time_us()) : Cell(std::string())};
}

absl::Status ResultsFile::Open(const std::string& path, const proto::ExperimentSpec& spec,
                               const std::string& deployment) {
  out_.open(path, std::ios::app);
  if (!out_) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
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
  out_ << "{\"record\": \"experiment\", \"started_at\": " << JsonString(stamp)
       << ", \"testbed_version\": " << JsonString(TESTBED_VERSION)
       << ", \"git_revision\": " << JsonString(TESTBED_GIT_REVISION)
       << ", \"deployment\": " << JsonString(deployment)
       << ", \"host\": {\"name\": " << JsonString(host.nodename)
       << ", \"kernel\": " << JsonString(host.release)
       << ", \"machine\": " << JsonString(host.machine)
       << ", \"cpus\": " << std::thread::hardware_concurrency() << "}, \"spec\": " << spec_json
       << "}" << std::endl;
  return absl::OkStatus();
}

void ResultsFile::Append(const proto::ResultRow& row) {
  std::vector<std::string> columns = ResultColumns();
  std::vector<Cell> cells = ResultCells(row);
  columns.insert(columns.begin(), "record");
  cells.insert(cells.begin(), std::string("result"));
  out_ << JsonObject(columns, cells) << std::endl;
}

}  // namespace testbed
