// Where a run's daemons write their logs: the folder the user named (made if
// missing, always kept), or a fresh one under the temp folder that is removed
// once the run succeeded and kept, its path said, when it failed - so a
// failed run can always be read back and a good one leaves nothing behind.
//
// Thread-safety: a value; one owner.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace testbed {

class LogFolder {
 public:
  // `given` empty: a fresh folder `<temp>/<prefix>-XXXXXX`, owned.
  static absl::StatusOr<LogFolder> Open(const std::string& given, std::string_view prefix);

  const std::string& path() const { return path_; }

  // The run ended: an owned folder goes after success unless `keep`; after a
  // failure `who` says where the logs are on `err`.
  void Finish(bool succeeded, bool keep, std::ostream& err, std::string_view who) const;

 private:
  LogFolder(std::string path, bool owned) : path_(std::move(path)), owned_(owned) {}
  std::string path_;
  bool owned_ = false;
};

}  // namespace testbed
