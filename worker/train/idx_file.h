// IDX files (the MNIST family's format): a magic of two zero bytes, a type
// byte and a dimension count, then each dimension as a big-endian uint32,
// then the elements. Read through zlib, so gzipped files (as Debian ships
// them) and plain ones read alike. Only unsigned bytes (type 0x08) are read:
// it is what image and label files hold.
//
// A file that is shorter than its header says, has trailing bytes, a bad
// magic or another element type is refused with an error naming the file;
// nothing is trusted before the sizes check out.
//
// Thread-safety: a free function; reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace testbed {

struct IdxArray {
  std::vector<std::int64_t> dims;  // outermost first: {count, rows, cols}
  std::vector<std::uint8_t> data;  // row-major, dims' product elements
};

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path);

}  // namespace testbed
