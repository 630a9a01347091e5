// A labelled data set in memory, and Fashion-MNIST as Debian ships it
// (dataset-fashion-mnist: gzipped IDX files under
// /usr/share/datasets/fashion-mnist/). Images are columns of floats in
// [0, 1], one column per sample, as the MLP multiplies them.
//
// Thread-safety: a Dataset is a value; read it from any number of threads.
#pragma once

#include <Eigen/Core>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace testbed {

struct Dataset {
  Eigen::MatrixXf inputs;    // features x samples
  std::vector<int> labels;   // one per sample, in [0, classes)
  int classes = 10;

  int samples() const { return static_cast<int>(labels.size()); }
  int features() const { return static_cast<int>(inputs.rows()); }
};

struct TrainTestSplit {
  Dataset train;
  Dataset test;
};

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Reads the four files under `dir`; a missing one is one line naming the
// Debian package that provides them.
absl::StatusOr<TrainTestSplit> LoadFashionMnist(const std::string& dir = kFashionMnistDir);

// Whether the training images are there (tests skip themselves otherwise).
bool FashionMnistInstalled(const std::string& dir = kFashionMnistDir);

}  // namespace testbed
