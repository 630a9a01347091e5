#include "experiments/cli/spec_file.h"

#include <fstream>
#include <sstream>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/link_units.h"
#include "proto/spec.h"

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

// `name: "value"` (spaces around either), as a line of text format writes a
// string field.
bool SplitQuotedField(absl::string_view line, std::string& name, std::string& value) {
  line = absl::StripLeadingAsciiWhitespace(line);
  std::size_t end = 0;
  while (end < line.size() && (absl::ascii_isalnum(line[end]) || line[end] == '_')) ++end;
  if (end == 0) return false;
  name = std::string(line.substr(0, end));
  line = absl::StripLeadingAsciiWhitespace(line.substr(end));
  if (line.empty() || line.front() != ':') return false;
  line = absl::StripLeadingAsciiWhitespace(line.substr(1));
  if (line.empty() || line.front() != '"') return false;
  const std::size_t close = line.find('"', 1);
  if (close == absl::string_view::npos) return false;
  value = std::string(line.substr(1, close - 1));
  return true;
}

// The spelling of `field: "value"` since the spec's strings became typed
// (proto/vocabulary.proto), or "" where `line` is not one.
std::string NewSpelling(const google::protobuf::Descriptor& root, absl::string_view line) {
  std::string name, value;
  if (!SplitQuotedField(line, name, value)) return "";
  if (name == "link_rate" && FindField(root, "link_rate_bps") != nullptr) {
    const absl::StatusOr<std::uint64_t> bps = ParseLinkRateBps(value);
    return bps.ok() ? absl::StrCat("link_rate_bps: ", *bps) : "";
  }
  if (name == "model_alpha") {
    const absl::StatusOr<double> seconds = ParseDuration(value);
    return seconds.ok() ? absl::StrCat("model_alpha_us: ", *seconds * 1e6) : "";
  }
  const google::protobuf::FieldDescriptor* field = FindField(root, name);
  if (field == nullptr) return "";
  if (field->enum_type() != nullptr) {
    const std::string word = absl::StrReplaceAll(value, {{"-", "_"}});
    if (field->enum_type()->FindValueByName(word) == nullptr) return "";
    return absl::StrCat(name, ": ", word);
  }
  if (field->message_type() != nullptr && field->message_type()->full_name() == "testbed.proto.Segment") {
    const absl::StatusOr<proto::Segment> segment = ParseSegment(value);
    if (!segment.ok()) return "";
    std::string inner;
    google::protobuf::TextFormat::Printer printer;
    printer.SetSingleLineMode(true);
    printer.PrintToString(*segment, &inner);
    return absl::StrCat(name, " { ", absl::StripAsciiWhitespace(inner), " }");
  }
  return "";
}

// One line for a spec written before its strings became typed:
// "FILE:LINE: dtype: \"float32\" is the old spelling; write dtype: float32".
std::string OldSpellingError(const std::string& path, const google::protobuf::Message& spec,
                             const std::string& text, int line) {
  if (line < 0) return "";
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (line >= static_cast<int>(lines.size())) return "";
  const std::string spelling = NewSpelling(*spec.GetDescriptor(), lines[line]);
  if (spelling.empty()) return "";
  return absl::StrCat(path, ":", line + 1, ": ", absl::StripAsciiWhitespace(lines[line]),
                      " is the old spelling; write ", spelling);
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
