#include "experiments/results/json_lines.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

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

absl::Status ForEachJsonLine(
    std::istream& in, const std::function<absl::Status(const std::string& line)>& visit) {
  std::string line;
  bool too_long = false;
  for (int number = 1; BoundedGetline(in, line, kMaxResultsLineBytes, too_long); ++number) {
    const std::string where = absl::StrCat("line ", number, ": ");
    if (too_long) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "longer than ", kMaxResultsLineBytes, " bytes: not a results file"));
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (absl::Status st = visit(line); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat(where, st.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ForEachJsonLineOfFiles(
    const std::vector<std::string>& files,
    const std::function<absl::Status(const std::string& line)>& visit) {
  for (const std::string& file : files) {
    std::error_code error;
    if (!std::filesystem::is_regular_file(file, error)) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": not a regular file (results files are JSON lines on disk)"));
    }
    std::ifstream in(file);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", file));
    if (absl::Status st = ForEachJsonLine(in, visit); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": ", st.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace testbed
