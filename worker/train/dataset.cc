#include "worker/train/dataset.h"

#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/train/idx_file.h"

namespace testbed {
namespace {

absl::StatusOr<Dataset> LoadPart(const std::string& dir, const std::string& prefix) {
  const std::string images_path = absl::StrCat(dir, "/", prefix, "-images-idx3-ubyte.gz");
  const std::string labels_path = absl::StrCat(dir, "/", prefix, "-labels-idx1-ubyte.gz");
  for (const std::string& path : {images_path, labels_path}) {
    if (!std::filesystem::exists(path)) {
      return absl::NotFoundError(absl::StrCat(
          path, " is missing: install Debian's dataset-fashion-mnist package "
                "(apt-get install dataset-fashion-mnist)"));
    }
  }
  absl::StatusOr<IdxArray> images = ReadIdxFile(images_path);
  if (!images.ok()) return images.status();
  absl::StatusOr<IdxArray> labels = ReadIdxFile(labels_path);
  if (!labels.ok()) return labels.status();
  if (images->dims.size() != 3 || labels->dims.size() != 1 || images->dims[0] != labels->dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_path, " and ", labels_path, ": expected N images of rows x cols and N labels"));
  }
  const std::int64_t samples = images->dims[0];
  const std::int64_t features = images->dims[1] * images->dims[2];
  Dataset data;
  // IDX is row-major sample by sample: each sample's pixels are one column.
  data.inputs = Eigen::Map<const Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic>>(
                    images->data.data(), features, samples)
                    .cast<float>() /
                255.0f;
  data.labels.assign(labels->data.begin(), labels->data.end());
  for (int label : data.labels) {
    if (label >= data.classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(labels_path, ": label ", label, " outside 0..", data.classes - 1));
    }
  }
  return data;
}

}  // namespace

absl::StatusOr<TrainTestSplit> LoadFashionMnist(const std::string& dir) {
  absl::StatusOr<Dataset> train = LoadPart(dir, "train");
  if (!train.ok()) return train.status();
  absl::StatusOr<Dataset> test = LoadPart(dir, "t10k");
  if (!test.ok()) return test.status();
  return TrainTestSplit{.train = *std::move(train), .test = *std::move(test)};
}

bool FashionMnistInstalled(const std::string& dir) {
  return std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz");
}

}  // namespace testbed
