// `testbed train`'s local deployment end to end on the real data set: two
// workers as threads, their gradients all-reduced by ring over UCX on
// loopback (and, in a shorter run, through the parameter server over gRPC),
// reach 80% test accuracy on Fashion-MNIST within one epoch, and report
// what the JSON rows promise. Skipped where Debian's dataset-fashion-mnist
// is not installed; .ci/install-deps installs it, so CI runs it.
#include <gtest/gtest.h>

#include <vector>

#include "worker/train/dataset.h"
#include "experiments/cluster/local_training.h"

namespace testbed {
namespace {

class TrainAccuracyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!FashionMnistInstalled()) return;
    absl::StatusOr<TrainTestSplit> loaded = LoadFashionMnist();
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    data_ = new TrainTestSplit(*std::move(loaded));
  }
  static void TearDownTestSuite() {
    delete data_;
    data_ = nullptr;
  }
  void SetUp() override {
    if (data_ == nullptr) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }

  static LocalTrainingOptions Options(const std::string& sync) {
    LocalTrainingOptions options;
    options.workers = 2;
    options.sync = sync;
    options.train.hidden = {64};
    options.train.batch = 32;
    options.train.optimizer = "adam";
    options.train.learning_rate = 2e-3;
    options.train.seed = 1;
    options.report.train_accuracy_samples = 2000;
    return options;
  }

  static std::vector<proto::TrainingRow> Run(const LocalTrainingOptions& options) {
    std::vector<proto::TrainingRow> rows;
    absl::Status status =
        RunLocalTraining(options, *data_, [&](const proto::TrainingRow& row) { rows.push_back(row); });
    EXPECT_TRUE(status.ok()) << status;
    return rows;
  }

  static TrainTestSplit* data_;
};

TrainTestSplit* TrainAccuracyTest::data_ = nullptr;

TEST_F(TrainAccuracyTest, RingOverUcxReaches80PercentInOneEpoch) {
  LocalTrainingOptions options = Options("ring");
  options.train.epochs = 1;
  options.report.every_steps = 300;
  const std::vector<proto::TrainingRow> rows = Run(options);
  ASSERT_GE(rows.size(), 2u);
  const proto::TrainingRow& run = rows.back();
  EXPECT_EQ(run.kind(), proto::TrainingRow::RUN);
  EXPECT_EQ(run.step(), 60000u / 64);
  EXPECT_GE(run.test_accuracy(), 0.80);
  EXPECT_TRUE(run.has_time_to_target_seconds());
  EXPECT_GT(run.samples_per_second(), 0);
  // Ring moves 2 (N-1)/N of the gradient out and as much in: at N = 2, the
  // whole gradient each way.
  EXPECT_EQ(run.payload_bytes(), 2u * 4 * run.parameters());
  EXPECT_GT(run.compute_seconds(), 0);
  EXPECT_GT(run.communication_seconds(), 0);
  EXPECT_NEAR(run.step_seconds(), run.compute_seconds() + run.communication_seconds(), 1e-9);
  for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
    EXPECT_EQ(rows[i].kind(), proto::TrainingRow::PROGRESS);
    EXPECT_GT(rows[i].loss(), 0);
  }
  EXPECT_LT(rows[rows.size() - 2].loss(), rows[0].loss() + 1e-9) << "the loss falls";
}

TEST_F(TrainAccuracyTest, ParameterServerTrainsToo) {
  LocalTrainingOptions options = Options("ps");
  options.train.steps = 300;
  const std::vector<proto::TrainingRow> rows = Run(options);
  ASSERT_FALSE(rows.empty());
  EXPECT_GE(rows.back().test_accuracy(), 0.75);
  // Push the gradient, pull the parameters.
  EXPECT_EQ(rows.back().payload_bytes(), 2u * 4 * rows.back().parameters());
}

TEST_F(TrainAccuracyTest, BadInputIsRefusedByName) {
  LocalTrainingOptions options = Options("allgather-ish");
  absl::Status unknown = RunLocalTraining(options, *data_, [](const proto::TrainingRow&) {});
  EXPECT_NE(unknown.message().find("unknown --sync"), std::string::npos) << unknown;
  options = Options("ring");
  options.train.batch = 40000;
  absl::Status too_big = RunLocalTraining(options, *data_, [](const proto::TrainingRow&) {});
  EXPECT_NE(too_big.message().find("global batch"), std::string::npos) << too_big;
}

}  // namespace
}  // namespace testbed
