// What every reader of a results file shares: files are JSON lines on disk,
// read line by line with a bound, so a file that is not one (a device, a
// binary with no newline) is refused instead of buffered whole.
//
// Thread-safety: free functions.
#pragma once

#include <cstddef>
#include <functional>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace testbed {

// The longest line a results reader accepts: a row with per-rank lists for
// 1024 ranks is under 64 KiB.
inline constexpr std::size_t kMaxResultsLineBytes = std::size_t{1} << 20;

// Calls `visit` with each non-blank line of `in` and its number (from 1);
// stops at the first error, which is returned prefixed with "line N: ". A
// line over kMaxResultsLineBytes fails the same way.
absl::Status ForEachJsonLine(
    std::istream& in, const std::function<absl::Status(const std::string& line)>& visit);

// The same over files, in order; errors name the file. Only regular files
// are read (a device such as /dev/zero never ends).
absl::Status ForEachJsonLineOfFiles(
    const std::vector<std::string>& files,
    const std::function<absl::Status(const std::string& line)>& visit);

}  // namespace testbed
