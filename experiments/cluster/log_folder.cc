#include "experiments/cluster/log_folder.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace testbed {

namespace fs = std::filesystem;

absl::StatusOr<LogFolder> LogFolder::Open(const std::string& given, std::string_view prefix) {
  if (!given.empty()) {
    std::error_code error;
    fs::create_directories(given, error);
    if (error) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create the log folder ", given, ": ", error.message()));
    }
    return LogFolder(given, /*owned=*/false);
  }
  std::string pattern = (fs::temp_directory_path() / (std::string(prefix) + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create a log folder under ", fs::temp_directory_path().string()));
  }
  return LogFolder(pattern, /*owned=*/true);
}

void LogFolder::Finish(bool succeeded, bool keep, std::ostream& err, std::string_view who) const {
  if (!succeeded) {
    err << who << ": the daemons' logs are in " << path_ << "\n";
  } else if (owned_ && !keep) {
    std::error_code ignored;  // a log folder that will not go is no reason to fail a run
    fs::remove_all(path_, ignored);
  }
}

}  // namespace testbed
