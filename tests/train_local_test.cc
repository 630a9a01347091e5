// `testbed train`'s local deployment on a toy data set: the parameter server
// is real testbed-server daemons (S = 1 and S = 2: the coordinator and a
// shard joined to it), started and ended by the run, and it trains the same
// as ring over UCX - step for step the same loss and accuracy, since both
// equal one worker with the global batch (tests/train_sync_test.cc).
//
// Tolerance: 1e-4 on worker 0's mean batch loss (parameters agree within
// 1e-5, see train_sync_test.cc; the loss of a 4-class softmax moves by less
// than 10x that).
#include <gtest/gtest.h>

#include <vector>

#include "allreduce/traffic.h"
#include "experiments/cluster/local_training.h"
#include "tests/toy_training.h"

namespace testbed {
namespace {

// The toy set of the train tests, for training and testing alike.
TrainTestSplit ToyData() {
  const Dataset data = toy_training::ToyData();
  return TrainTestSplit{data, data};
}

LocalTrainingOptions Options(const std::string& sync, int servers) {
  LocalTrainingOptions options;
  options.workers = 3;
  options.servers = servers;
  options.sync = sync;
  options.train.hidden = {9, 7};
  options.train.batch = 3;
  options.train.optimizer = "momentum";
  options.train.learning_rate = 0.2;
  options.train.steps = 5;
  options.report.every_steps = 1;
  options.report.train_accuracy_samples = 0;
  return options;
}

std::vector<proto::TrainingRow> Train(const LocalTrainingOptions& options,
                                      const TrainTestSplit& data) {
  std::vector<proto::TrainingRow> rows;
  const absl::Status status =
      RunLocalTraining(options, data, [&](const proto::TrainingRow& row) { rows.push_back(row); });
  EXPECT_TRUE(status.ok()) << status;
  return rows;
}

TEST(TrainLocalTest, ParameterServerDaemonsTrainLikeRing) {
  const TrainTestSplit data = ToyData();
  const std::vector<proto::TrainingRow> ring = Train(Options("ring", 1), data);
  ASSERT_EQ(ring.size(), 6u);  // five progress rows and the run's
  for (int servers : {1, 2}) {
    const std::vector<proto::TrainingRow> ps = Train(Options("ps", servers), data);
    ASSERT_EQ(ps.size(), ring.size()) << servers << " servers";
    for (std::size_t i = 0; i < ps.size(); ++i) {
      EXPECT_NEAR(ps[i].loss(), ring[i].loss(), 1e-4) << servers << " servers, row " << i;
      EXPECT_EQ(ps[i].test_accuracy(), ring[i].test_accuracy()) << servers << " servers";
    }
    const proto::TrainingRow& run = ps.back();
    EXPECT_EQ(run.deployment(), "local-threads+server-daemons");
    EXPECT_EQ(run.servers(), static_cast<std::uint32_t>(servers));
    // Push the gradient and pull the parameters, whatever the shards' split.
    EXPECT_EQ(run.payload_bytes(), 2u * 4 * run.parameters());
  }
}

// Buckets and overlap through the daemons: one tensor per 40-byte bucket,
// pushed as backpropagation finishes it; the same training, and the same
// bytes - every element pushed and pulled once, whatever the buckets.
TEST(TrainLocalTest, ParameterServerBucketsWithOverlapTrainLikeRing) {
  const TrainTestSplit data = ToyData();
  const std::vector<proto::TrainingRow> ring = Train(Options("ring", 1), data);
  LocalTrainingOptions options = Options("ps", 2);
  options.bucket_bytes = 40;
  options.overlap = true;
  const std::vector<proto::TrainingRow> ps = Train(options, data);
  ASSERT_EQ(ps.size(), ring.size());
  for (std::size_t i = 0; i < ps.size(); ++i) {
    EXPECT_NEAR(ps[i].loss(), ring[i].loss(), 1e-4) << "row " << i;
  }
  const proto::TrainingRow& run = ps.back();
  EXPECT_TRUE(run.overlap());
  EXPECT_EQ(run.bucket_bytes(), 40u);
  EXPECT_EQ(run.payload_bytes(), 2u * 4 * run.parameters());
}

// The rows say what was compressed and what it cost: ring's fp16 is a ring
// of halves (worker 0's share of ring's closed form for M = 2 bytes an
// element, as counted off its schedule); the parameter server takes the push
// as halves (2 bytes an element) and serves float32 parameters (4).
TEST(TrainLocalTest, RowsCarryCompressedAndDenseBytes) {
  const TrainTestSplit data = ToyData();
  LocalTrainingOptions options = Options("ring", 1);
  options.compression = *ParseCompression("fp16");
  const proto::TrainingRow ring = Train(options, data).back();
  const auto parameters = static_cast<std::uint64_t>(ring.parameters());
  EXPECT_EQ(ring.compress(), "fp16");
  EXPECT_EQ(ring.dense_gradient_bytes(), 4 * parameters);
  const RankTraffic rank0 =
      CountTraffic(*FindCollective("ring"), 3, 2 * static_cast<std::int64_t>(parameters), 2)
          .per_rank[0];
  EXPECT_EQ(ring.payload_bytes(),
            static_cast<std::uint64_t>(rank0.bytes_sent + rank0.bytes_received));
  options = Options("ps", 1);
  options.compression = *ParseCompression("fp16");
  const proto::TrainingRow ps = Train(options, data).back();
  EXPECT_EQ(ps.compress(), "fp16");
  EXPECT_EQ(ps.dense_gradient_bytes(), 4 * parameters);
  EXPECT_EQ(ps.payload_bytes(), (2 + 4) * parameters);
}

TEST(TrainLocalTest, RefusesBadCompressionByName) {
  LocalTrainingOptions options = Options("ring", 1);
  // The flag refuses it; a spec file or a caller can still write it.
  options.compression = {.kind = CompressionConfig::Kind::kTopK, .ratio = 2};
  const absl::Status status =
      RunLocalTraining(options, ToyData(), [](const proto::TrainingRow&) {});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("--compress 'topk:2'"), std::string::npos) << status;
}

TEST(TrainLocalTest, RefusesNoServers) {
  const absl::Status status =
      RunLocalTraining(Options("ps", 0), ToyData(), [](const proto::TrainingRow&) {});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("--servers"), std::string::npos) << status;
}

}  // namespace
}  // namespace testbed
