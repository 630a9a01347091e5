#include "experiments/lab/lab_api.h"

#include <charconv>
#include <cstdint>
#include <cmath>
#include <map>
#include <sstream>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allreduce/collective.h"
#include "allreduce/cost_model.h"
#include "common/byte_size.h"
#include "experiments/lab/lab_memory.h"
#include "experiments/lab/lab_trace.h"
#include "experiments/results/course_table.h"
#include "experiments/results/result_row.h"
#include "experiments/results/table.h"
#include "proto/spec.h"

namespace testbed {
namespace {

constexpr std::int64_t kMaxRunBytes = std::int64_t{16} << 20;  // keeps a class's runs short
constexpr int kRunElementBytes = 4;                            // float32

LabResponse BadRequest(absl::string_view message) {
  return {.status = 400, .content_type = "text/plain", .body = absl::StrCat(message, "\n")};
}

const std::string* Find(const LabParams& params, const std::string& name) {
  const auto it = params.find(name);
  return it == params.end() ? nullptr : &it->second;
}

// An integer parameter in [lo, hi]; `fallback` when absent.
absl::StatusOr<std::int64_t> IntParam(const LabParams& params, const std::string& name,
                                      std::int64_t lo, std::int64_t hi, std::int64_t fallback) {
  const std::string* text = Find(params, name);
  if (text == nullptr) return fallback;
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error != std::errc() || end != text->data() + text->size()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be a whole number, not '",
                                                   *text, "'"));
  }
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be ", lo, "..", hi, ", not ",
                                                   value));
  }
  return value;
}

// A finite number in [lo, hi]; `fallback` when absent.
absl::StatusOr<double> NumberParam(const LabParams& params, const std::string& name, double lo,
                                   double hi, double fallback) {
  const std::string* text = Find(params, name);
  if (text == nullptr) return fallback;
  double value = 0;
  if (!absl::SimpleAtod(*text, &value) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be a number, not '", *text, "'"));
  }
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be between ", lo, " and ", hi,
                                                   ", not ", *text));
  }
  return value;
}

// A vector size per rank: "4096", "64KiB"; whole float32 elements.
absl::StatusOr<std::int64_t> BytesParam(const LabParams& params) {
  const std::string* text = Find(params, "bytes");
  if (text == nullptr) return absl::InvalidArgumentError("bytes is missing (e.g. bytes=64KiB)");
  absl::StatusOr<std::int64_t> bytes = ParseByteSize(*text);
  if (!bytes.ok()) return absl::InvalidArgumentError(absl::StrCat("bytes: ", bytes.status().message()));
  if (*bytes < kRunElementBytes || *bytes > kMaxRunBytes || *bytes % kRunElementBytes != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bytes must be a multiple of ", kRunElementBytes, " from ", kRunElementBytes, " to ",
        HumanByteSize(kMaxRunBytes), ", not ", *text));
  }
  return bytes;
}

absl::StatusOr<const Collective*> CollectiveParam(const LabParams& params, Kinds kinds) {
  const std::string* name = Find(params, "collective");
  if (name == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("collective is missing (choose from ", CollectiveNames(kinds), ")"));
  }
  const Collective* c = FindCollective(*name, kinds);
  if (c == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown collective '", *name,
                                                   "' (choose from ", CollectiveNames(kinds), ")"));
  }
  return c;
}

std::string RowsJson(const std::vector<proto::ResultRow>& rows) {
  std::vector<std::string> lines;
  for (const proto::ResultRow& row : rows) lines.push_back(ResultRecordJson(row));
  return absl::StrCat("[", absl::StrJoin(lines, ","), "]");
}

absl::StatusOr<LabRun> RunParam(const LabParams& params, const LabRunner& runner) {
  absl::StatusOr<std::int64_t> id = IntParam(params, "id", 1, INT32_MAX, 0);
  if (!id.ok()) return id.status();
  std::optional<LabRun> run = runner.Get(static_cast<int>(*id));
  if (!run) return absl::InvalidArgumentError(absl::StrCat("no run with id ", *id));
  return *run;
}

// ZeRO's collectives, as the registry names them: the ring all-reduce is the
// ring reduce-scatter followed by the ring all-gather.
constexpr const char* kZeroAllReduce = "ring";
constexpr const char* kZeroReduceScatter = "reduce-scatter";
constexpr const char* kZeroAllGather = "all-gather";

// Queues one experiment of `algorithms` at the request's n, bytes and iters.
LabResponse Enqueue(const LabParams& params, int max_workers,
                    const std::vector<std::string>& algorithms, LabRunner& runner) {
  absl::StatusOr<std::int64_t> n = IntParam(params, "n", 1, max_workers, 4);
  if (!n.ok()) return BadRequest(n.status().message());
  absl::StatusOr<std::int64_t> bytes = BytesParam(params);
  if (!bytes.ok()) return BadRequest(bytes.status().message());
  absl::StatusOr<std::int64_t> iters = IntParam(params, "iters", 1, 100, 5);
  if (!iters.ok()) return BadRequest(iters.status().message());

  proto::ExperimentSpec spec;
  spec.set_name("lab");
  spec.set_workers(static_cast<std::uint32_t>(*n));
  for (const std::string& algorithm : algorithms) spec.add_algorithms(algorithm);
  spec.add_sizes(*bytes);
  spec.set_iterations(static_cast<std::uint32_t>(*iters));
  spec.set_warmup(1);
  // Each rank reports its rounds, which the page draws as a timeline
  // (assets/measure.js; experiments/results/row_timeline.h for the CLI's).
  spec.set_record_rounds(true);
  ApplyDefaults(spec);
  if (absl::Status st = ValidateSpec(spec); !st.ok()) return BadRequest(st.message());
  const absl::StatusOr<int> id = runner.Enqueue(std::move(spec));
  if (!id.ok()) {  // the queue is full: 429, as HTTP says for too many requests
    return {.status = 429, .content_type = "text/plain",
            .body = absl::StrCat(id.status().message(), "\n")};
  }
  return {.status = 202,
          .body = absl::StrCat("{\"id\":", *id, ",\"queued_ahead\":", runner.QueuedAhead(*id),
                               "}")};
}

}  // namespace

LabResponse LabInfoResponse(const LabInfo& info) {
  return {.body = absl::StrCat("{\"max_workers\":", info.max_workers, ",\"runs_on\":",
                               JsonString(info.runs_on), ",\"link_gbit\":", info.link_gbit,
                               "}")};
}

LabResponse CollectivesResponse() {
  std::vector<std::string> entries;
  for (const Collective& c : AllCollectives()) {
    entries.push_back(absl::StrCat(
        "{\"name\":", JsonString(c.name), ",\"semantics\":", JsonString(Name(c.semantics)),
        ",\"summary\":", JsonString(c.summary), ",\"formula\":", JsonString(c.formula),
        ",\"bottleneck\":", JsonString(c.bottleneck),
        ",\"traceable\":", c.has_schedule() || c.runs_on_parameter_server() ? "true" : "false",
        ",\"parameter_server\":", c.runs_on_parameter_server() ? "true" : "false", "}"));
  }
  return {.body = absl::StrCat("[", absl::StrJoin(entries, ","), "]")};
}

LabResponse TraceResponse(const LabParams& params) {
  const std::string* name = Find(params, "collective");
  absl::StatusOr<std::int64_t> n = IntParam(params, "n", 1, kLabMaxWorkers, 4);
  if (!n.ok()) return BadRequest(n.status().message());
  absl::StatusOr<std::int64_t> count = IntParam(params, "count", 1, kLabMaxTraceCount, 8);
  if (!count.ok()) return BadRequest(count.status().message());
  // S, the parameter server's shards; LabTraceJson holds it to 1..N for ps.
  absl::StatusOr<std::int64_t> servers = IntParam(params, "servers", 1, kLabMaxWorkers, 1);
  if (!servers.ok()) return BadRequest(servers.status().message());
  absl::StatusOr<std::string> json = LabTraceJson(name == nullptr ? "ring" : *name,
                                                  static_cast<int>(*n), *count,
                                                  static_cast<int>(*servers));
  if (!json.ok()) return BadRequest(json.status().message());
  return {.body = *std::move(json)};
}

LabResponse MemoryResponse(const LabParams& params) {
  absl::StatusOr<double> parameters = NumberParam(params, "params", 1, 1e15, 7e9);
  if (!parameters.ok()) return BadRequest(parameters.status().message());
  absl::StatusOr<std::int64_t> gpus = IntParam(params, "gpus", 1, 1 << 20, 8);
  if (!gpus.ok()) return BadRequest(gpus.status().message());
  absl::StatusOr<std::int64_t> stages = IntParam(params, "stages", 1, 1024, 4);
  if (!stages.ok()) return BadRequest(stages.status().message());
  absl::StatusOr<std::int64_t> micro = IntParam(params, "micro_batches", 1, 1 << 20, 8);
  if (!micro.ok()) return BadRequest(micro.status().message());
  return {.body = MemoryJson(*parameters, static_cast<int>(*gpus), static_cast<int>(*stages),
                             static_cast<int>(*micro))};
}

LabResponse ModelResponse(const LabParams& params) {
  absl::StatusOr<const Collective*> c = CollectiveParam(params, Kinds::kAll);
  if (!c.ok()) return BadRequest(c.status().message());
  absl::StatusOr<std::int64_t> n = IntParam(params, "n", 1, kLabMaxWorkers, 4);
  if (!n.ok()) return BadRequest(n.status().message());
  absl::StatusOr<std::int64_t> bytes = BytesParam(params);
  if (!bytes.ok()) return BadRequest(bytes.status().message());
  absl::StatusOr<double> alpha_us = NumberParam(params, "alpha_us", 0, 1e6, 50);
  if (!alpha_us.ok()) return BadRequest(alpha_us.status().message());
  absl::StatusOr<double> rate_gbit = NumberParam(params, "rate_gbit", 1e-3, 1e4, 10);
  if (!rate_gbit.ok()) return BadRequest(rate_gbit.status().message());
  const LinkModel link{*alpha_us * 1e-6, 8.0 / (*rate_gbit * 1e9)};
  // The lab's runs use one parameter-server shard.
  const CostEstimate estimate =
      (*c)->runs_on_parameter_server()
          ? EstimateParameterServer(static_cast<int>(*n), /*servers=*/1, *bytes,
                                    kRunElementBytes, link)
          : EstimateCollective(**c, static_cast<int>(*n), *bytes, kRunElementBytes, link);
  return {.body = absl::StrCat(
              "{\"collective\":", JsonString((*c)->name), ",\"n\":", *n, ",\"bytes\":", *bytes,
              ",\"rounds\":", estimate.rounds, ",\"bottleneck_bytes\":",
              estimate.bottleneck_bytes, ",\"time_us\":", estimate.time_s * 1e6,
              ",\"formula\":", JsonString((*c)->formula), ",\"formula_bytes\":",
              (*c)->formula_bytes(static_cast<int>(*n), *bytes), "}")};
}

LabResponse SubmitRunResponse(const LabParams& params, int max_workers, LabRunner& runner) {
  absl::StatusOr<const Collective*> c = CollectiveParam(params, Kinds::kAll);
  if (!c.ok()) return BadRequest(c.status().message());
  return Enqueue(params, max_workers, {std::string((*c)->name)}, runner);
}

LabResponse SubmitZeroTrafficResponse(const LabParams& params, int max_workers,
                                      LabRunner& runner) {
  return Enqueue(params, max_workers, {kZeroAllReduce, kZeroReduceScatter, kZeroAllGather},
                 runner);
}

LabResponse ZeroTrafficResponse(const LabParams& params, const LabRunner& runner) {
  absl::StatusOr<LabRun> run = RunParam(params, runner);
  if (!run.ok()) return BadRequest(run.status().message());
  std::map<std::string, MeasuredCollective> measured;
  for (const proto::ResultRow& row : run->rows) {
    measured[row.algorithm()] = {static_cast<double>(row.payload_bytes_total()),
                                 row.time_us_avg()};
  }
  std::vector<std::string> stages;
  if (measured.contains(kZeroAllReduce) && measured.contains(kZeroReduceScatter) &&
      measured.contains(kZeroAllGather)) {
    for (const MeasuredZeroStage& s :
         ZeroTrafficOf(measured[kZeroAllReduce], measured[kZeroReduceScatter],
                       measured[kZeroAllGather])) {
      stages.push_back(absl::StrCat(
          "{\"stage\":", s.stage, ",\"collectives\":", JsonString(s.collectives),
          ",\"bytes\":", s.bytes, ",\"time_us\":", s.time_us, ",\"bytes_vs_ddp\":",
          s.bytes_vs_ddp, ",\"time_vs_ddp\":", s.time_vs_ddp, ",\"model_vs_ddp\":",
          s.model_vs_ddp, "}"));
    }
  }
  return {.body = absl::StrCat("{\"id\":", run->id, ",\"state\":", JsonString(Name(run->state)),
                               ",\"queued_ahead\":", runner.QueuedAhead(run->id),
                               ",\"stages\":[", absl::StrJoin(stages, ","),
                               "],\"rows\":", RowsJson(run->rows),
                               ",\"error\":", JsonString(run->error), "}")};
}

LabResponse RunStatusResponse(const LabParams& params, const LabRunner& runner) {
  absl::StatusOr<LabRun> run = RunParam(params, runner);
  if (!run.ok()) return BadRequest(run.status().message());
  std::vector<std::string> progress;
  for (const std::string& line : run->progress) progress.push_back(JsonString(line));
  return {.body = absl::StrCat(
              "{\"id\":", run->id, ",\"state\":", JsonString(Name(run->state)),
              ",\"queued_ahead\":", runner.QueuedAhead(run->id), ",\"progress\":[",
              absl::StrJoin(progress, ","), "],\"rows\":", RowsJson(run->rows),
              ",\"error\":", JsonString(run->error), "}")};
}

LabResponse RunRowsResponse(const LabParams& params, const LabRunner& runner) {
  absl::StatusOr<LabRun> run = RunParam(params, runner);
  if (!run.ok()) return BadRequest(run.status().message());
  std::string body;
  for (const proto::ResultRow& row : run->rows) absl::StrAppend(&body, ResultRecordJson(row), "\n");
  return {.content_type = "application/x-ndjson", .body = std::move(body)};
}

LabResponse ResultsResponse(const LabRunner& runner) {
  const std::vector<proto::ResultRow> rows = runner.AllRows();
  std::ostringstream markdown;
  if (!rows.empty()) {
    if (absl::Status st = PrintCourseTable(rows, markdown); !st.ok()) markdown << st.message();
  }
  return {.body = absl::StrCat("{\"rows\":", RowsJson(rows),
                               ",\"markdown\":", JsonString(markdown.str()), "}")};
}

}  // namespace testbed
