// The classroom handouts' answer keys (experiments/labs/*.md) against the
// testbed itself, so a key cannot drift from the formulas, schedules and
// calculators it quotes. A key is a Markdown table `| # | source | row |
// field | answer |` (experiments/labs/README.md says how to write one); each
// row's answer is compared, to the precision it is written in, with what the
// CLI prints, what the lab page's handler serves, or a recorded results file.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "experiments/lab/lab_api.h"
#include "tests/process_runner.h"

namespace testbed {
namespace {

namespace fs = std::filesystem;
using google::protobuf::Value;

const fs::path kLabsDir = fs::path(TESTBED_SOURCE_DIR) / "experiments" / "labs";

struct KeyRow {
  std::string where;     // "lab1-....md:71", for the failure message
  std::string source;    // `testbed ...`, `GET /api/...` or `file PATH`
  std::string selector;  // "algorithm=ring,bytes=1024" or "-"
  std::string field;     // "total_bytes", "zero.2.gb_per_gpu"
  std::string answer;
};

std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  for (absl::string_view cell : absl::StrSplit(absl::StripAsciiWhitespace(line), '|')) {
    cells.emplace_back(absl::StripAsciiWhitespace(cell));
  }
  // "| a | b |" splits into "", a, b, "": drop the outer empties.
  if (cells.size() >= 2) cells = {cells.begin() + 1, cells.end() - 1};
  return cells;
}

// Every row of every answer-key table in the handout.
std::vector<KeyRow> ReadAnswerKeys(const fs::path& handout) {
  const std::vector<std::string> kHeader = {"#", "source", "row", "field", "answer"};
  std::ifstream in(handout);
  std::vector<KeyRow> rows;
  std::string line;
  bool in_key = false;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "|")) {
      in_key = false;
      continue;
    }
    const std::vector<std::string> cells = Cells(line);
    if (cells == kHeader) {
      in_key = true;
      continue;
    }
    if (!in_key || cells.size() != kHeader.size() || absl::StartsWith(cells[1], "---")) continue;
    rows.push_back({absl::StrCat(handout.filename().string(), ":", number),
                    std::string(absl::StripSuffix(absl::StripPrefix(cells[1], "`"), "`")),
                    cells[2], cells[3], cells[4]});
  }
  return rows;
}

absl::StatusOr<std::vector<Value>> ParseJsonLines(const std::string& text) {
  std::vector<Value> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!absl::StartsWith(line, "{")) continue;  // stderr's notes, a table's header
    Value value;
    if (!google::protobuf::util::JsonStringToMessage(line, &value).ok()) {
      return absl::InvalidArgumentError(absl::StrCat("not JSON: ", line));
    }
    rows.push_back(std::move(value));
  }
  return rows;
}

// GET /api/x?a=1&b=2 through the page's own handlers, without a socket.
absl::StatusOr<std::vector<Value>> ApiRows(const std::string& target) {
  const std::vector<std::string> path_query = absl::StrSplit(target, absl::MaxSplits('?', 1));
  LabParams params;
  if (path_query.size() == 2) {
    for (absl::string_view pair : absl::StrSplit(path_query[1], '&')) {
      const std::vector<std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
      params.emplace(kv[0], kv.size() == 2 ? kv[1] : "");
    }
  }
  const std::map<std::string, LabResponse (*)(const LabParams&)> handlers = {
      {"/api/trace", &TraceResponse},
      {"/api/memory", &MemoryResponse},
      {"/api/model", &ModelResponse}};
  const auto handler = handlers.find(path_query[0]);
  if (handler == handlers.end()) return absl::NotFoundError("no such lab API: " + target);
  const LabResponse response = handler->second(params);
  if (response.status != 200) {
    return absl::InvalidArgumentError(absl::StrCat(response.status, ": ", response.body));
  }
  return ParseJsonLines(response.body);
}

absl::StatusOr<std::vector<Value>> SourceRows(const std::string& source) {
  if (absl::StartsWith(source, "testbed ")) {
    // From the repository's root, so a key may name a recorded file in it.
    const auto [code, output] = testing::RunProgram(
        absl::StrCat("cd '", TESTBED_SOURCE_DIR, "' && ", TESTBED_CLI_PATH),
        source.substr(std::string("testbed ").size()));
    if (code != 0) return absl::InternalError(absl::StrCat("exit ", code, ": ", output));
    return ParseJsonLines(output);
  }
  if (absl::StartsWith(source, "GET ")) return ApiRows(source.substr(4));
  if (absl::StartsWith(source, "file ")) {
    std::ifstream in(fs::path(TESTBED_SOURCE_DIR) / source.substr(5));
    if (!in) return absl::NotFoundError("cannot read " + source.substr(5));
    std::stringstream text;
    text << in.rdbuf();
    return ParseJsonLines(text.str());
  }
  return absl::InvalidArgumentError("a source is `testbed ...`, `GET /api/...` or `file PATH`");
}

const Value* FieldAt(const Value& root, const std::string& path) {
  const Value* at = &root;
  for (const std::string& part : std::vector<std::string>(absl::StrSplit(path, '.'))) {
    if (at->has_struct_value()) {
      const auto& fields = at->struct_value().fields();
      const auto found = fields.find(part);
      if (found == fields.end()) return nullptr;
      at = &found->second;
    } else if (int index = 0; at->has_list_value() && absl::SimpleAtoi(part, &index) &&
                              index >= 0 && index < at->list_value().values_size()) {
      at = &at->list_value().values(index);
    } else {
      return nullptr;
    }
  }
  return at;
}

// A number is right when the testbed's value, rounded to the decimals the
// answer is written with, is the answer: "26.3" holds for [26.25, 26.35),
// "939524096" only for itself. Anything else compares as text.
bool Matches(const Value& actual, const std::string& answer) {
  double expected = 0;
  double value = 0;
  bool number = false;
  if (actual.has_number_value()) {
    value = actual.number_value();
    number = true;
  } else if (actual.has_string_value()) {
    number = absl::SimpleAtod(actual.string_value(), &value);  // fit's "workers": "4"
  }
  if (number && absl::SimpleAtod(answer, &expected)) {
    const std::size_t dot = answer.find('.');
    const int decimals = dot == std::string::npos ? 0 : static_cast<int>(answer.size() - dot - 1);
    const double scale = std::pow(10.0, decimals);
    return std::round(value * scale) == std::round(expected * scale);
  }
  return actual.has_string_value() && actual.string_value() == answer;
}

bool RowSelected(const Value& row, const std::string& selector) {
  if (selector == "-") return true;
  for (absl::string_view condition : absl::StrSplit(selector, ',')) {
    const std::vector<std::string> kv = absl::StrSplit(condition, absl::MaxSplits('=', 1));
    const Value* field = kv.size() == 2 ? FieldAt(row, kv[0]) : nullptr;
    if (field == nullptr || !Matches(*field, kv[1])) return false;
  }
  return true;
}

std::string Text(const Value& value) {
  if (value.has_number_value()) return absl::StrCat(value.number_value());
  if (value.has_string_value()) return value.string_value();
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(value, &json);
  return json;
}

// OK when the testbed says what the key says; else which and why.
absl::Status CheckKeyRow(const KeyRow& key,
                         std::map<std::string, std::vector<Value>>& source_cache) {
  if (!source_cache.contains(key.source)) {
    absl::StatusOr<std::vector<Value>> rows = SourceRows(key.source);
    if (!rows.ok()) return rows.status();
    source_cache[key.source] = std::move(*rows);
  }
  const std::vector<Value>& rows = source_cache[key.source];
  std::vector<const Value*> selected;
  for (const Value& row : rows) {
    if (RowSelected(row, key.selector)) selected.push_back(&row);
  }
  if (selected.size() != 1) {
    return absl::NotFoundError(absl::StrCat(selected.size(), " rows of ", rows.size(),
                                            " match '", key.selector, "' (want one)"));
  }
  const Value* actual = FieldAt(*selected.front(), key.field);
  if (actual == nullptr) return absl::NotFoundError("no field " + key.field);
  if (!Matches(*actual, key.answer)) {
    return absl::FailedPreconditionError(absl::StrCat(key.field, ": the key says ", key.answer,
                                                      ", the testbed says ", Text(*actual)));
  }
  return absl::OkStatus();
}

std::vector<fs::path> Handouts() {
  std::vector<fs::path> handouts;
  for (const fs::directory_entry& entry : fs::directory_iterator(kLabsDir)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, "lab") && entry.path().extension() == ".md") {
      handouts.push_back(entry.path());
    }
  }
  std::sort(handouts.begin(), handouts.end());
  return handouts;
}

TEST(LabHandouts, SixHandoutsEachWithAnAnswerKey) {
  const std::vector<fs::path> handouts = Handouts();
  ASSERT_EQ(handouts.size(), 6u);
  for (const fs::path& handout : handouts) {
    EXPECT_GE(ReadAnswerKeys(handout).size(), 5u) << handout << " has (almost) no answer key";
  }
}

TEST(LabHandouts, EveryAnswerIsWhatTheTestbedSays) {
  std::map<std::string, std::vector<Value>> source_cache;
  int checked = 0;
  for (const fs::path& handout : Handouts()) {
    for (const KeyRow& key : ReadAnswerKeys(handout)) {
      const absl::Status status = CheckKeyRow(key, source_cache);
      EXPECT_TRUE(status.ok()) << key.where << " (" << key.source << " | " << key.selector
                               << "): " << status.message();
      ++checked;
    }
  }
  EXPECT_GE(checked, 40);
}

// The checker itself: a wrong figure, a figure beyond its precision, a row
// that is not there and a source that fails are each caught.
TEST(LabHandouts, AWrongAnswerFails) {
  std::map<std::string, std::vector<Value>> cache;
  const std::string traffic = "testbed traffic -n 8 -b 64MiB -a ring --format json";
  const std::string memory = "GET /api/memory?params=7e9&gpus=8";
  const std::string ring = "algorithm=ring";
  EXPECT_TRUE(CheckKeyRow({"", traffic, ring, "total_bytes", "939524096"}, cache).ok());
  EXPECT_FALSE(CheckKeyRow({"", traffic, ring, "total_bytes", "939524097"}, cache).ok());
  EXPECT_FALSE(CheckKeyRow({"", traffic, "algorithm=tree", "rounds", "14"}, cache).ok());
  EXPECT_TRUE(CheckKeyRow({"", memory, "-", "zero.2.gb_per_gpu", "26.3"}, cache).ok());
  EXPECT_FALSE(CheckKeyRow({"", memory, "-", "zero.2.gb_per_gpu", "26.4"}, cache).ok());
  EXPECT_FALSE(CheckKeyRow({"", memory, "-", "zero.2.gb_per_gpu", "26.2"}, cache).ok());
  EXPECT_TRUE(CheckKeyRow({"", memory, "-", "zero.2.gb_per_gpu", "26.25"}, cache).ok());
  EXPECT_FALSE(CheckKeyRow({"", memory, "-", "zero.2.gb_per_gpu", "26.24"}, cache).ok());
  EXPECT_FALSE(CheckKeyRow({"", memory, "-", "zero.9.gb_per_gpu", "1"}, cache).ok());
  EXPECT_FALSE(CheckKeyRow({"", "testbed traffic -n 0", "-", "rounds", "1"}, cache).ok());
  EXPECT_FALSE(CheckKeyRow({"", "GET /api/memory?gpus=x", "-", "params", "1"}, cache).ok());
}

}  // namespace
}  // namespace testbed
