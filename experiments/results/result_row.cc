#include "experiments/results/result_row.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "experiments/results/json_lines.h"
#include "allreduce/data_type.h"

namespace testbed {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Reflection;

std::vector<const FieldDescriptor*> Fields() {
  const auto* descriptor = proto::ResultRow::descriptor();
  std::vector<const FieldDescriptor*> fields;
  for (int i = 0; i < descriptor->field_count(); ++i) fields.push_back(descriptor->field(i));
  std::sort(fields.begin(), fields.end(),
            [](const auto* a, const auto* b) { return a->number() < b->number(); });
  return fields;
}

std::int64_t IntegerAt(const proto::ResultRow& row, const Reflection& r,
                       const FieldDescriptor* f, int index) {
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return r.GetRepeatedInt32(row, f, index);
    case FieldDescriptor::CPPTYPE_INT64: return r.GetRepeatedInt64(row, f, index);
    case FieldDescriptor::CPPTYPE_UINT32: return r.GetRepeatedUInt32(row, f, index);
    case FieldDescriptor::CPPTYPE_UINT64:
      return static_cast<std::int64_t>(r.GetRepeatedUInt64(row, f, index));
    default: return 0;
  }
}

Cell ScalarCell(const proto::ResultRow& row, const Reflection& r, const FieldDescriptor* f) {
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return std::int64_t{r.GetInt32(row, f)};
    case FieldDescriptor::CPPTYPE_INT64: return r.GetInt64(row, f);
    case FieldDescriptor::CPPTYPE_UINT32: return std::int64_t{r.GetUInt32(row, f)};
    case FieldDescriptor::CPPTYPE_UINT64: return static_cast<std::int64_t>(r.GetUInt64(row, f));
    case FieldDescriptor::CPPTYPE_DOUBLE: return r.GetDouble(row, f);
    case FieldDescriptor::CPPTYPE_FLOAT: return double{r.GetFloat(row, f)};
    case FieldDescriptor::CPPTYPE_BOOL: return std::int64_t{r.GetBool(row, f)};
    case FieldDescriptor::CPPTYPE_STRING: return r.GetString(row, f);
    default: return std::string();  // enums and messages: none in a row
  }
}

}  // namespace

std::vector<std::string> ResultColumns() {
  std::vector<std::string> columns;
  for (const FieldDescriptor* f : Fields()) columns.push_back(f->name());
  return columns;
}

std::vector<Cell> ResultCells(const proto::ResultRow& row) {
  const Reflection& r = *row.GetReflection();
  std::vector<Cell> cells;
  for (const FieldDescriptor* f : Fields()) {
    if (f->is_repeated()) {
      std::vector<std::int64_t> values;
      for (int i = 0; i < r.FieldSize(row, f); ++i) values.push_back(IntegerAt(row, r, f, i));
      cells.emplace_back(std::move(values));
    } else if (f->has_presence() && !r.HasField(row, f)) {
      cells.emplace_back(std::string());
    } else {
      cells.push_back(ScalarCell(row, r, f));
    }
  }
  return cells;
}

absl::StatusOr<CostEstimate> EstimateRow(const proto::ResultRow& row, const LinkModel& link) {
  const std::string& dtype = row.dtype().empty() ? std::string("float32") : row.dtype();
  const std::optional<DataType> type = ParseDataType(dtype);
  if (!type) return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", dtype, "'"));
  return EstimateAlgorithm(row.algorithm(), static_cast<int>(row.workers()),
                           static_cast<int>(std::max<std::uint32_t>(1, row.servers())),
                           row.bytes(), static_cast<std::int64_t>(ElementSize(*type)), link);
}

std::string ResultRecordJson(const proto::ResultRow& row) {
  // An unset optional field is left out, not written as its empty cell: ""
  // is no number to protobuf's JSON parser, and ReadResultRows refused every
  // line with one (found by tests/fuzz/result_rows_fuzzer).
  const Reflection& r = *row.GetReflection();
  const std::vector<std::string> all_columns = ResultColumns();
  const std::vector<Cell> all_cells = ResultCells(row);
  const std::vector<const FieldDescriptor*> fields = Fields();
  std::vector<std::string> columns = {"record"};
  std::vector<Cell> cells = {std::string("result")};
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (!fields[i]->is_repeated() && fields[i]->has_presence() && !r.HasField(row, fields[i])) {
      continue;
    }
    columns.push_back(all_columns[i]);
    cells.push_back(all_cells[i]);
  }
  return JsonObject(columns, cells);
}

namespace {

// A row's counts against the documented limits (common/limits.h), before
// anything is computed from it: a fit or an estimate builds schedules for the
// row's N. Names the field, its value and the limit.
absl::Status CheckRowLimits(const proto::ResultRow& row, SpecReader reader) {
  const auto over = [](std::string_view field, auto value, auto limit) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), " ", value,
                                                   " is over the limit of ", limit,
                                                   " (common/limits.h)"));
  };
  if (row.workers() > static_cast<std::uint32_t>(MaxWorkers(reader))) {
    return over("workers", row.workers(), MaxWorkers(reader));
  }
  if (row.servers() > static_cast<std::uint32_t>(kMaxServers)) {
    return over("servers", row.servers(), kMaxServers);
  }
  if (row.bytes() > kMaxBytesPerWorker) return over("bytes", row.bytes(), kMaxBytesPerWorker);
  if (row.iterations() > static_cast<std::uint32_t>(kMaxIterations)) {
    return over("iterations", row.iterations(), kMaxIterations);
  }
  for (const auto& [field, size] :
       {std::pair<std::string_view, int>{"shard_payload_bytes", row.shard_payload_bytes_size()},
        {"shard_theory_bytes", row.shard_theory_bytes_size()}}) {
    if (size > kMaxServers) {
      return over(absl::StrCat(std::string(field), "'s length"), size, kMaxServers);
    }
  }
  return absl::OkStatus();
}

// One line of a results file as `Message`, unknown fields skipped (files
// from newer builds still read).
template <typename Message>
absl::StatusOr<Message> ParseLine(const std::string& line) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  Message message;
  if (auto st = google::protobuf::util::JsonStringToMessage(line, &message, options); !st.ok()) {
    return absl::InvalidArgumentError(st.message().as_string());
  }
  return message;
}

// A "result" line, held to what a row must say and to the limits.
absl::StatusOr<proto::ResultRow> ParseResultLine(const std::string& line, SpecReader reader) {
  absl::StatusOr<proto::ResultRow> row = ParseLine<proto::ResultRow>(line);
  if (!row.ok()) return row.status();
  if (row->algorithm().empty() || row->workers() < 1 || row->bytes() < 0) {
    return absl::InvalidArgumentError("a result needs an algorithm, workers >= 1 and bytes >= 0");
  }
  if (absl::Status st = CheckRowLimits(*row, reader); !st.ok()) return st;
  return row;
}

// Keeps the "result" records of a results file's lines in `rows`.
std::function<absl::Status(const std::string&)> KeepResultRecords(
    std::vector<proto::ResultRow>& rows, SpecReader reader) {
  return [&rows, reader](const std::string& line) -> absl::Status {
    absl::StatusOr<proto::ResultsRecordKind> kind = ParseLine<proto::ResultsRecordKind>(line);
    if (!kind.ok()) return kind.status();
    if (kind->record() != "result") return absl::OkStatus();
    absl::StatusOr<proto::ResultRow> row = ParseResultLine(line, reader);
    if (!row.ok()) return row.status();
    rows.push_back(*std::move(row));
    return absl::OkStatus();
  };
}

}  // namespace

absl::StatusOr<std::vector<proto::ResultRow>> ReadResultRows(std::istream& in,
                                                             SpecReader reader) {
  std::vector<proto::ResultRow> rows;
  if (absl::Status st = ForEachJsonLine(in, KeepResultRecords(rows, reader)); !st.ok()) return st;
  return rows;
}

absl::StatusOr<std::vector<proto::ResultRow>> ReadResultsFiles(
    const std::vector<std::string>& files, SpecReader reader) {
  std::vector<proto::ResultRow> rows;
  if (absl::Status st = ForEachJsonLineOfFiles(files, KeepResultRecords(rows, reader));
      !st.ok()) {
    return st;
  }
  return rows;
}

absl::StatusOr<std::vector<RecordedRun>> ReadRecordedRuns(const std::vector<std::string>& files) {
  std::vector<RecordedRun> runs;
  const absl::Status status =
      ForEachJsonLineOfFiles(files, [&runs](const std::string& line) -> absl::Status {
        absl::StatusOr<proto::ResultsRecordKind> kind = ParseLine<proto::ResultsRecordKind>(line);
        if (!kind.ok()) return kind.status();
        if (kind->record() == "experiment") {
          absl::StatusOr<proto::ExperimentRecord> record = ParseLine<proto::ExperimentRecord>(line);
          if (!record.ok()) return record.status();
          runs.push_back({record->spec(), record->deployment(), {}});
          return absl::OkStatus();
        }
        if (kind->record() != "result") return absl::OkStatus();
        if (runs.empty()) return absl::InvalidArgumentError("a result before any experiment record");
        absl::StatusOr<proto::ResultRow> row = ParseResultLine(line, SpecReader::kSimulator);
        if (!row.ok()) return row.status();
        runs.back().rows.push_back(*std::move(row));
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return runs;
}

}  // namespace testbed
