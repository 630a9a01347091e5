#include "worker/train/idx_file.h"

#include <zlib.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

constexpr int kUnsignedByte = 0x08;
// Fashion-MNIST's largest file holds 47 MB; a header claiming more than
// this is garbage, refused before allocating anything.
constexpr std::int64_t kMaxElements = std::int64_t{1} << 30;
// The data is read a piece at a time, so a truncated file whose header
// claims much costs no more memory than the file holds.
constexpr std::size_t kPieceBytes = 1 << 20;

struct GzClose {
  void operator()(gzFile_s* file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzClose>;

// Reads exactly `bytes`, or says how many it got.
absl::Status ReadExactly(gzFile file, const std::string& path, void* into, std::size_t bytes,
                         const char* what) {
  std::size_t done = 0;
  auto* out = static_cast<unsigned char*>(into);
  while (done < bytes) {
    const unsigned int want = static_cast<unsigned int>(std::min<std::size_t>(bytes - done, 1 << 30));
    const int got = gzread(file, out + done, want);
    if (got < 0) {
      int code = 0;
      return absl::DataLossError(
          absl::StrCat(path, ": cannot read the ", what, ": ", gzerror(file, &code)));
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  if (done != bytes) {
    return absl::DataLossError(absl::StrCat(path, ": truncated: the ", what, " needs ", bytes,
                                            " bytes, the file has ", done));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  GzFile file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  unsigned char magic[4];
  if (absl::Status s = ReadExactly(file.get(), path, magic, sizeof magic, "header"); !s.ok()) {
    return s;
  }
  if (magic[0] != 0 || magic[1] != 0 || magic[3] == 0 || magic[3] > 4) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an IDX file (bad magic)"));
  }
  if (magic[2] != kUnsignedByte) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": IDX element type ", static_cast<int>(magic[2]), ", only unsigned bytes (8) read"));
  }
  IdxArray array;
  std::int64_t elements = 1;
  for (int d = 0; d < magic[3]; ++d) {
    unsigned char be[4];
    if (absl::Status s = ReadExactly(file.get(), path, be, sizeof be, "header"); !s.ok()) return s;
    const std::int64_t dim = (std::int64_t{be[0]} << 24) | (be[1] << 16) | (be[2] << 8) | be[3];
    array.dims.push_back(dim);
    if (dim > 0 && elements > kMaxElements / dim) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": IDX header claims more than ", kMaxElements, " elements"));
    }
    elements *= dim;
  }
  const std::size_t bytes = static_cast<std::size_t>(elements);
  while (array.data.size() < bytes) {
    const std::size_t done = array.data.size();
    array.data.resize(std::min(bytes, done + kPieceBytes));
    if (absl::Status s = ReadExactly(file.get(), path, array.data.data() + done,
                                     array.data.size() - done, "data");
        !s.ok()) {
      return absl::DataLossError(absl::StrCat(path, ": truncated: the header names ", bytes,
                                              " bytes of data, the file has fewer"));
    }
  }
  unsigned char extra;
  if (gzread(file.get(), &extra, 1) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": trailing bytes after the ", elements, " elements the header names"));
  }
  return array;
}

}  // namespace testbed
