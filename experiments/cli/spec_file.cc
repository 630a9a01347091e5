#include "experiments/cli/spec_file.h"

#include <fstream>
#include <sstream>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

// Every parse error as FILE:LINE:COLUMN: message (lines and columns from 1).
class SpecErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit SpecErrors(std::string path) : path_(std::move(path)) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!text_.empty()) text_ += "\n";
    text_ += absl::StrCat(path_, ":", line + 1, ":", column + 1, ": ", message);
  }
  const std::string& text() const { return text_; }

 private:
  std::string path_;
  std::string text_;
};

}  // namespace

absl::Status ReadSpecFileInto(const std::string& path, google::protobuf::Message& spec,
                              std::string_view what) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read spec file ", path));
  std::stringstream text;
  text << in.rdbuf();
  google::protobuf::TextFormat::Parser parser;
  SpecErrors errors(path);
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text.str(), &spec)) {
    return absl::InvalidArgumentError(errors.text().empty()
                                          ? absl::StrCat(path, ": not a valid ", std::string(what))
                                          : errors.text());
  }
  return absl::OkStatus();
}

}  // namespace testbed
