// `testbed train --ps-mode`: the parameter server's sync, async and ssp:K
// modes from the flag through LocalTrainingOptions and PsSync to real
// testbed-server daemons, and the rows that say which mode ran. The modes'
// rules themselves are proved at the store (parameter_store_stale_test.cc);
// here a run in each mode completes and its rows name it, and bad or
// misplaced values are refused by name.
#include <gtest/gtest.h>
#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "experiments/cluster/local_training.h"
#include "proto/training.pb.h"
#include "tests/process_runner.h"
#include "tests/toy_training.h"
#include "worker/train/ps_sync.h"

namespace testbed {
namespace {

TEST(PsModeTest, ReadsSyncAsyncAndSspWithItsBound) {
  for (const std::string text : {"sync", "async", "ssp:0", "ssp:2", "ssp:1000"}) {
    absl::StatusOr<PsMode> mode = ParsePsMode(text);
    ASSERT_TRUE(mode.ok()) << text << ": " << mode.status();
    EXPECT_EQ(mode->Name(), text);
  }
  EXPECT_EQ(ParsePsMode("sync")->consistency, proto::TensorSpec::SYNCHRONOUS);
  EXPECT_EQ(ParsePsMode("async")->consistency, proto::TensorSpec::ASYNCHRONOUS);
  EXPECT_EQ(ParsePsMode("ssp:3")->consistency, proto::TensorSpec::BOUNDED_STALENESS);
  EXPECT_EQ(ParsePsMode("ssp:3")->staleness, 3u);
  for (const std::string text : {"", "ssp", "ssp:", "ssp:-1", "ssp:x", "ssp:2x", "ssp:+2", "bsp",
                                 "SYNC", "ssp:99999999999"}) {
    const absl::Status refused = ParsePsMode(text).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(refused.message().find("unknown ps mode '" + text + "'"), std::string::npos)
        << refused;
    EXPECT_NE(refused.message().find("sync, async, ssp:K"), std::string::npos) << refused;
  }
}

TrainTestSplit ToyData() {
  const Dataset data = toy_training::ToyData();
  return TrainTestSplit{data, data};
}

LocalTrainingOptions Options(const std::string& sync, const std::string& ps_mode) {
  LocalTrainingOptions options;
  options.workers = 3;
  options.sync = sync;
  if (!ps_mode.empty()) options.ps_mode = *ParsePsMode(ps_mode);
  options.train.hidden = {9, 7};
  options.train.batch = 3;
  options.train.optimizer = "sgd";
  options.train.learning_rate = 0.2;
  options.train.steps = 30;
  options.report.every_steps = 10;
  options.report.train_accuracy_samples = 0;
  return options;
}

std::vector<proto::TrainingRow> Train(const LocalTrainingOptions& options) {
  std::vector<proto::TrainingRow> rows;
  const absl::Status status = RunLocalTraining(
      options, ToyData(), [&](const proto::TrainingRow& row) { rows.push_back(row); });
  EXPECT_TRUE(status.ok()) << status;
  return rows;
}

// Three workers through a real shard in each stale mode: 30 steps complete
// (a worker more than K ahead waits, none forever) and every row says the mode.
TEST(TrainPsModeTest, StaleModesTrainAndEveryRowSaysTheMode) {
  for (const std::string mode : {"async", "ssp:2", "ssp:0"}) {
    const std::vector<proto::TrainingRow> rows = Train(Options("ps", mode));
    ASSERT_EQ(rows.size(), 4u) << mode;  // three progress rows and the run's
    for (const proto::TrainingRow& row : rows) {
      EXPECT_EQ(row.ps_mode(), mode);
      EXPECT_TRUE(std::isfinite(row.loss())) << mode;
    }
    EXPECT_EQ(rows.back().kind(), proto::TrainingRow::RUN);
    EXPECT_EQ(rows.back().step(), 30u);
    // Each step still pushes the gradient and pulls the parameters.
    EXPECT_EQ(rows.back().payload_bytes(), 2u * 4 * rows.back().parameters()) << mode;
  }
}

TEST(TrainPsModeTest, PsRowsSaySyncByDefaultAndAllReduceRowsNoMode) {
  LocalTrainingOptions options = Options("ps", "");
  options.train.steps = 2;
  options.report.every_steps = 0;
  for (const proto::TrainingRow& row : Train(options)) EXPECT_EQ(row.ps_mode(), "sync");
  options.sync = "ring";
  for (const proto::TrainingRow& row : Train(options)) EXPECT_EQ(row.ps_mode(), "");
}

TEST(TrainPsModeTest, RefusesABadModeAndAModeWithoutTheParameterServer) {
  EXPECT_NE(ParsePsMode("ssp:k").status().message().find("unknown ps mode 'ssp:k'"),
            std::string::npos);
  absl::Status status = RunLocalTraining(Options("ring", "ssp:2"), ToyData(), [](const proto::TrainingRow&) {});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("--ps-mode ssp:2 needs --sync ps"), std::string::npos)
      << status;
}

// The spec a daemon is handed carries the mode, and a daemon checks it as
// the threads do.
TEST(TrainPsModeTest, TheTrainingSpecCarriesTheModeAndIsCheckedLikeTheFlags) {
  proto::TrainingSpec spec;
  spec.set_sync("ps");
  spec.mutable_ps_mode()->set_consistency(proto::TensorSpec::BOUNDED_STALENESS);
  spec.mutable_ps_mode()->set_staleness(3);
  absl::StatusOr<TrainingSetup> setup = TrainingSetupFromSpec(spec);
  ASSERT_TRUE(setup.ok()) << setup.status();
  ASSERT_TRUE(setup->ps_mode.has_value());
  EXPECT_EQ(setup->ps_mode->Name(), "ssp:3");
  EXPECT_EQ(TrainingSpecOf(*setup).ps_mode().staleness(), 3u);
  // A spec file can write what the flag cannot: a staleness in a mode
  // without one, or one past the bound.
  spec.mutable_ps_mode()->set_consistency(proto::TensorSpec::ASYNCHRONOUS);
  EXPECT_NE(TrainingSetupFromSpec(spec).status().message().find("needs BOUNDED_STALENESS"),
            std::string::npos);
  spec.mutable_ps_mode()->set_consistency(proto::TensorSpec::BOUNDED_STALENESS);
  spec.mutable_ps_mode()->set_staleness(3000000000u);
  EXPECT_NE(TrainingSetupFromSpec(spec).status().message().find("over 2^31"), std::string::npos);
  spec.set_sync("tree");
  spec.mutable_ps_mode()->set_consistency(proto::TensorSpec::ASYNCHRONOUS);
  spec.mutable_ps_mode()->set_staleness(0);
  const absl::Status refused = TrainingSetupFromSpec(spec).status();
  EXPECT_NE(refused.message().find("--ps-mode async needs --sync ps"), std::string::npos)
      << refused;
}

bool HaveFashionMnist() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

// The command line end to end: `testbed train --sync ps --ps-mode ssp:2`.
TEST(TrainPsModeCliTest, SspRunsThroughTheCommandAndItsRowsSayIt) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string out = ::testing::TempDir() + "/train_ssp.jsonl";
  const auto [status, output] = testing::RunCli(
      "train --sync ps --ps-mode ssp:2 -n 2 --steps 30 --hidden 16 --batch 8 --report-every 10 "
      "--out " + out);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("ps ssp:2, N = 2"), std::string::npos) << "the summary names the mode";
  std::ifstream in(out);
  std::vector<proto::TrainingRow> rows;
  for (std::string line; std::getline(in, line);) {
    proto::TrainingRow row;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &row).ok()) << line;
    rows.push_back(row);
  }
  ASSERT_EQ(rows.size(), 4u) << output;
  for (const proto::TrainingRow& row : rows) {
    EXPECT_EQ(row.sync(), "ps");
    EXPECT_EQ(row.ps_mode(), "ssp:2");
  }
  EXPECT_EQ(rows.back().step(), 30u);
  EXPECT_GT(rows.back().test_accuracy(), 0.1) << "better than chance after 30 steps";
}

// On testbed-worker daemons (--network loopback) the mode travels in the
// spec the coordinator hands out, and the rows still say it.
TEST(TrainPsModeCliTest, TheModeReachesWorkerDaemons) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string out = ::testing::TempDir() + "/train_async_daemons.jsonl";
  const auto [status, output] = testing::RunCli(
      "train --network loopback --sync ps --ps-mode async -n 2 --steps 10 --hidden 16 "
      "--batch 8 --report-every 5 --out " + out);
  ASSERT_EQ(status, 0) << output;
  std::ifstream in(out);
  int rows = 0;
  for (std::string line; std::getline(in, line); ++rows) {
    proto::TrainingRow row;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &row).ok()) << line;
    EXPECT_EQ(row.ps_mode(), "async");
  }
  EXPECT_EQ(rows, 3) << output;
}

TEST(TrainPsModeCliTest, BadOrMisplacedModesAreOneLineErrors) {
  struct Case {
    std::string args;
    std::string message;
  };
  for (const Case& c : {Case{"train --sync ps --ps-mode ssp:x", "unknown ps mode 'ssp:x'"},
                        Case{"train --sync ps --ps-mode", "--ps-mode"}}) {
    const auto [status, output] = testing::RunCli(c.args);
    EXPECT_TRUE(status > 0 && status < 128) << c.args << ": " << status << "\n" << output;
    EXPECT_NE(output.find(c.message), std::string::npos) << c.args << "\n" << output;
  }
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const auto [status, output] = testing::RunCli("train --sync ring --ps-mode async --steps 1");
  EXPECT_TRUE(status > 0 && status < 128) << status << "\n" << output;
  EXPECT_NE(output.find("--ps-mode async needs --sync ps"), std::string::npos) << output;
}

}  // namespace
}  // namespace testbed
