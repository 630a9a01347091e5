// ReadIdxFile (worker/train/idx_file.cc) on small IDX files made here, plain
// and gzipped: the dimensions and bytes come back as written, and a file
// that is truncated, has trailing bytes, a bad magic or another element type
// is refused with an error naming the file - never read past its end.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "worker/train/dataset.h"
#include "worker/train/idx_file.h"

namespace testbed {
namespace {

using Bytes = std::vector<unsigned char>;

// An IDX file of unsigned bytes: magic, big-endian dimensions, data.
Bytes Idx(const std::vector<std::uint32_t>& dims, const Bytes& data) {
  Bytes file{0, 0, 0x08, static_cast<unsigned char>(dims.size())};
  for (std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) file.push_back((d >> shift) & 0xff);
  }
  file.insert(file.end(), data.begin(), data.end());
  return file;
}

class IdxFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("idx_file_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WritePlain(const std::string& name, const Bytes& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  std::string WriteGzip(const std::string& name, const Bytes& bytes) {
    const std::string path = (dir_ / name).string();
    gzFile file = gzopen(path.c_str(), "wb");
    gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(file);
    return path;
  }

  std::filesystem::path dir_;
};

const Bytes kPixels{0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255};

TEST_F(IdxFileTest, ReadsPlainAndGzippedFilesAlike) {
  const Bytes file = Idx({2, 2, 3}, kPixels);
  for (const std::string& path : {WritePlain("plain", file), WriteGzip("gzipped.gz", file)}) {
    absl::StatusOr<IdxArray> array = ReadIdxFile(path);
    ASSERT_TRUE(array.ok()) << array.status();
    EXPECT_EQ(array->dims, (std::vector<std::int64_t>{2, 2, 3}));
    EXPECT_EQ(array->data, std::vector<std::uint8_t>(kPixels.begin(), kPixels.end()));
  }
}

TEST_F(IdxFileTest, RefusesATruncatedFileNamingIt) {
  Bytes file = Idx({2, 2, 3}, kPixels);
  file.resize(file.size() - 5);
  const std::string path = WriteGzip("truncated.gz", file);
  absl::StatusOr<IdxArray> array = ReadIdxFile(path);
  ASSERT_FALSE(array.ok());
  EXPECT_NE(array.status().message().find(path), std::string::npos) << array.status();
  EXPECT_NE(array.status().message().find("truncated"), std::string::npos) << array.status();
}

TEST_F(IdxFileTest, RefusesATruncatedHeader) {
  const std::string path = WritePlain("header", Bytes{0, 0, 0x08, 3, 0, 0});
  absl::StatusOr<IdxArray> array = ReadIdxFile(path);
  ASSERT_FALSE(array.ok());
  EXPECT_NE(array.status().message().find("truncated"), std::string::npos) << array.status();
}

TEST_F(IdxFileTest, RefusesTrailingBytes) {
  Bytes file = Idx({3}, {7, 8, 9});
  file.push_back(10);
  absl::StatusOr<IdxArray> array = ReadIdxFile(WritePlain("trailing", file));
  ASSERT_FALSE(array.ok());
  EXPECT_NE(array.status().message().find("trailing"), std::string::npos) << array.status();
}

TEST_F(IdxFileTest, RefusesGarbageAndOtherElementTypes) {
  absl::StatusOr<IdxArray> garbage = ReadIdxFile(WritePlain("garbage", {'h', 'e', 'l', 'l', 'o'}));
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("not an IDX file"), std::string::npos) << garbage.status();

  Bytes floats = Idx({1}, {0, 0, 0, 0});
  floats[2] = 0x0d;  // float elements
  absl::StatusOr<IdxArray> typed = ReadIdxFile(WritePlain("floats", floats));
  ASSERT_FALSE(typed.ok());
  EXPECT_NE(typed.status().message().find("element type 13"), std::string::npos) << typed.status();
}

TEST_F(IdxFileTest, RefusesAHeaderClaimingMoreThanAnyDataSet) {
  // 2^64 - 2^33 + 1 elements: their count overflows 64 bits.
  absl::StatusOr<IdxArray> array =
      ReadIdxFile(WritePlain("huge", Idx({0xffffffff, 0xffffffff}, {})));
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument) << array.status();
}

TEST_F(IdxFileTest, ATruncatedFileClaimingMuchIsRefusedAfterReadingWhatItHas) {
  absl::StatusOr<IdxArray> array = ReadIdxFile(WritePlain("short", Idx({1000, 1000, 500}, {1, 2})));
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), absl::StatusCode::kDataLoss) << array.status();
}

TEST_F(IdxFileTest, AMissingFashionMnistFileNamesThePackage) {
  absl::StatusOr<TrainTestSplit> data = LoadFashionMnist(dir_.string());
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("dataset-fashion-mnist"), std::string::npos)
      << data.status();
  EXPECT_EQ(data.status().message().find('\n'), std::string::npos) << "one line";
}

}  // namespace
}  // namespace testbed
