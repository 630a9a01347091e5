#include "experiments/results/result_row.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
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

// getline with a bound: false at end of input; `too_long` when a line passes
// `limit` (the rest of the input is left unread).
bool BoundedGetline(std::istream& in, std::string& line, std::size_t limit, bool& too_long) {
  line.clear();
  too_long = false;
  char c;
  bool any = false;
  while (in.get(c)) {
    any = true;
    if (c == '\n') return true;
    if (line.size() == limit) {
      too_long = true;
      return true;
    }
    line += c;
  }
  return any;
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

absl::StatusOr<std::vector<proto::ResultRow>> ReadResultRows(std::istream& in) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  std::vector<proto::ResultRow> rows;
  std::string line;
  bool too_long = false;
  for (int number = 1; BoundedGetline(in, line, kMaxResultsLineBytes, too_long); ++number) {
    const std::string where = absl::StrCat("line ", number, ": ");
    if (too_long) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "longer than ", kMaxResultsLineBytes, " bytes: not a results file"));
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    proto::ResultsRecordKind kind;
    if (auto st = google::protobuf::util::JsonStringToMessage(line, &kind, options); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, st.message().as_string()));
    }
    if (kind.record() != "result") continue;
    proto::ResultRow row;
    if (auto st = google::protobuf::util::JsonStringToMessage(line, &row, options); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, st.message().as_string()));
    }
    if (row.algorithm().empty() || row.workers() < 1 || row.bytes() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "a result needs an algorithm, workers >= 1 and bytes >= 0"));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

absl::StatusOr<std::vector<proto::ResultRow>> ReadResultsFiles(
    const std::vector<std::string>& files) {
  std::vector<proto::ResultRow> rows;
  for (const std::string& file : files) {
    std::error_code error;
    if (!std::filesystem::is_regular_file(file, error)) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": not a regular file (results files are JSON lines on disk)"));
    }
    std::ifstream in(file);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", file));
    auto read = ReadResultRows(in);
    if (!read.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": ", read.status().message()));
    }
    rows.insert(rows.end(), read->begin(), read->end());
  }
  return rows;
}

}  // namespace testbed
