#include "experiments/cli/spec_file.h"

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/link_units.h"
#include "proto/spec.h"
#include "proto/training_spec.h"

namespace testbed {
namespace {

// Every parse error as FILE:LINE:COLUMN: message (lines and columns from 1).
class SpecErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit SpecErrors(std::string path) : path_(std::move(path)) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first_line_ < 0) first_line_ = line;
    if (!text_.empty()) text_ += "\n";
    text_ += absl::StrCat(path_, ":", line + 1, ":", column + 1, ": ", message);
  }
  const std::string& text() const { return text_; }
  int first_line() const { return first_line_; }  // from 0; -1 without errors

 private:
  std::string path_;
  std::string text_;
  int first_line_ = -1;
};

// The message type (`root` or one it holds) that has a field `name`.
const google::protobuf::FieldDescriptor* FindField(const google::protobuf::Descriptor& root,
                                                   const std::string& name, int depth = 0) {
  if (const auto* field = root.FindFieldByName(name)) return field;
  if (depth > 3) return nullptr;
  for (int i = 0; i < root.field_count(); ++i) {
    const google::protobuf::Descriptor* inner = root.field(i)->message_type();
    if (inner == nullptr) continue;
    if (const auto* field = FindField(*inner, name, depth + 1)) return field;
  }
  return nullptr;
}

// One `name: value` of a line of text format, as an old spec wrote it: a
// quoted string, a [list], or a bare number.
struct OldField {
  std::string text;   // as written
  std::string name;
  std::string value;  // without its quotes or brackets
  char kind;          // '"' quoted, '[' a list, ' ' bare
};

std::vector<OldField> FieldsOf(const std::string& line) {
  static const std::regex kField(R"re((\w+)\s*:\s*(?:"([^"]*)"|\[([^\]]*)\]|([^\s}\]]+)))re");
  std::vector<OldField> fields;
  for (auto it = std::sregex_iterator(line.begin(), line.end(), kField);
       it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    if (m[2].matched) fields.push_back({m[0], m[1], m[2], '"'});
    if (m[3].matched) fields.push_back({m[0], m[1], m[3], '['});
    if (m[4].matched) fields.push_back({m[0], m[1], m[4], ' '});
  }
  return fields;
}

// `message` on one line, as text format writes it: "name { fp16 { } }".
std::string OneLine(const std::string& name, const google::protobuf::Message& message) {
  std::string inner;
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  printer.PrintToString(message, &inner);
  return absl::StrCat(name, " { ", absl::StripAsciiWhitespace(inner), " }");
}

// "[\"1gbit\", \"100mbit\"]" -> "link_rates_bps: [1000000000, 100000000]".
std::string RatesSpelling(const std::string& list) {
  std::vector<std::string> rates;
  for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    if (item.size() < 2 || item.front() != '"' || item.back() != '"') return "";
    const absl::StatusOr<std::uint64_t> bps = ParseLinkRateBps(std::string(item.substr(1, item.size() - 2)));
    if (!bps.ok()) return "";
    rates.push_back(absl::StrCat(*bps));
  }
  return absl::StrCat("link_rates_bps: [", absl::StrJoin(rates, ", "), "]");
}

// The fields whose name or type changed when the specs became typed
// (proto/vocabulary.proto, proto/training.proto).
std::string RenamedSpelling(const google::protobuf::Descriptor& root, const OldField& f) {
  if (f.name == "link_rate" && f.kind == '"' && FindField(root, "link_rate_bps") != nullptr) {
    const absl::StatusOr<std::uint64_t> bps = ParseLinkRateBps(f.value);
    return bps.ok() ? absl::StrCat("link_rate_bps: ", *bps) : "";
  }
  if (f.name == "link_rates" && f.kind == '[') return RatesSpelling(f.value);
  if (f.name == "model_alpha" && f.kind == '"') {
    const absl::StatusOr<double> seconds = ParseDuration(f.value);
    return seconds.ok() ? absl::StrCat("model_alpha_us: ", *seconds * 1e6) : "";
  }
  double mib = 0;
  if (f.name == "bucket_mb" && f.kind == ' ' && absl::SimpleAtod(f.value, &mib) && mib >= 0) {
    return absl::StrCat("bucket_bytes: ", static_cast<std::uint64_t>(mib * (1 << 20)));
  }
  if (f.name == "compress" && f.kind == '"') {
    const absl::StatusOr<proto::Compression> compression = ParseCompressionText(f.value);
    return compression.ok() ? OneLine("compression", *compression) : "";
  }
  if (f.name == "ps_mode" && f.kind == '"') {
    const absl::StatusOr<proto::PsMode> mode = ParsePsModeText(f.value);
    return mode.ok() ? OneLine("ps_mode", *mode) : "";
  }
  return "";
}

// The spelling of `f` since the spec's strings became typed, or "" where it
// has not changed.
std::string NewSpelling(const google::protobuf::Descriptor& root, const OldField& f) {
  if (std::string renamed = RenamedSpelling(root, f); !renamed.empty()) return renamed;
  if (f.kind != '"') return "";
  const google::protobuf::FieldDescriptor* field = FindField(root, f.name);
  if (field == nullptr) return "";
  if (field->enum_type() != nullptr) {
    const std::string word = absl::StrReplaceAll(f.value, {{"-", "_"}});
    if (field->enum_type()->FindValueByName(word) == nullptr) return "";
    return absl::StrCat(f.name, ": ", word);
  }
  if (field->message_type() != nullptr && field->message_type()->full_name() == "testbed.proto.Segment") {
    const absl::StatusOr<proto::Segment> segment = ParseSegment(f.value);
    return segment.ok() ? OneLine(f.name, *segment) : "";
  }
  return "";
}

// One line for a spec written before its strings became typed:
// "FILE:LINE: dtype: \"float32\" is the old spelling; write dtype: float32".
std::string OldSpellingError(const std::string& path, const google::protobuf::Message& spec,
                             const std::string& text, int line) {
  if (line < 0) return "";
  const std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (line >= static_cast<int>(lines.size())) return "";
  for (const OldField& f : FieldsOf(lines[line])) {
    const std::string spelling = NewSpelling(*spec.GetDescriptor(), f);
    if (spelling.empty()) continue;
    return absl::StrCat(path, ":", line + 1, ": ", f.text, " is the old spelling; write ",
                        spelling);
  }
  return "";
}

}  // namespace

absl::Status ParseSpecText(const std::string& text, const std::string& path,
                           google::protobuf::Message& spec, std::string_view what) {
  google::protobuf::TextFormat::Parser parser;
  SpecErrors errors(path);
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &spec)) {
    if (std::string old = OldSpellingError(path, spec, text, errors.first_line()); !old.empty()) {
      return absl::InvalidArgumentError(old);
    }
    return absl::InvalidArgumentError(errors.text().empty()
                                          ? absl::StrCat(path, ": not a valid ", std::string(what))
                                          : errors.text());
  }
  return absl::OkStatus();
}

absl::Status ReadSpecFileInto(const std::string& path, google::protobuf::Message& spec,
                              std::string_view what) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read spec file ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseSpecText(text.str(), path, spec, what);
}

}  // namespace testbed
