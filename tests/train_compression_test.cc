// --compress: fp16 and top-k with error feedback, through the all-reduce
// (an all-gather of every rank's compressed gradient, summed in float32) and
// the parameter server (the shard takes dense float32: it gets the
// compressed gradient decoded).
//
// Tolerances:
//  - a half keeps 11 significant bits: a round trip is off by at most 2^-11
//    of the value (round to nearest), for values in half's normal range;
//  - fp16 training, N = 3, K = 5 steps of SGD at rate 0.2 on the toy data:
//    every element each worker sends is off by at most 2^-11 of itself, so
//    each step's update is off by well under 0.1% of its size. Parameters
//    end within 2.3e-5 of one worker's uncompressed training (measured;
//    the largest is 0.84); 2e-4 leaves ten times that. A sum instead of a
//    mean, or a dropped worker, is off by 1e-2 or more;
//  - top-k bookkeeping is exact: elements are moved, never split.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "server/in_process_shard.h"
#include "tests/toy_training.h"
#include "worker/ps_client.h"
#include "worker/train/compression.h"
#include "worker/train/ps_sync.h"

namespace testbed {
namespace {

using namespace toy_training;  // NOLINT: the shared toy setup

constexpr float kFp16TrainingTolerance = 2e-4f;

TEST(TrainCompressionConfigTest, ParsesTheThreeKinds) {
  EXPECT_TRUE(ParseCompression("none")->none());
  EXPECT_EQ(ParseCompression("fp16")->kind, CompressionConfig::Kind::kFp16);
  const absl::StatusOr<CompressionConfig> topk = ParseCompression("topk:0.01");
  ASSERT_TRUE(topk.ok()) << topk.status();
  EXPECT_EQ(topk->kind, CompressionConfig::Kind::kTopK);
  EXPECT_DOUBLE_EQ(topk->ratio, 0.01);
  EXPECT_EQ(topk->Name(), "topk:0.01");
  EXPECT_TRUE(ParseCompression("topk:1").ok());
}

TEST(TrainCompressionConfigTest, RefusesBadValuesByName) {
  for (const char* bad : {"fp8", "topk", "topk:", "topk:0", "topk:1.5", "topk:-0.1", "topk:x",
                          "TOPK:0.1", ""}) {
    const absl::StatusOr<CompressionConfig> parsed = ParseCompression(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(parsed.status().message().find(std::string("--compress '") + bad + "'"),
              std::string::npos)
        << parsed.status();
    EXPECT_NE(parsed.status().message().find("none, fp16, topk:RATIO"), std::string::npos);
  }
}

TEST(TrainFp16Test, RoundTripIsWithinHalfPrecision) {
  std::mt19937 random(7);
  std::uniform_real_distribution<float> value(-100.0f, 100.0f);
  std::vector<float> values = {0.0f, 1.0f, -2.0f, 0.5f, 1024.0f, 65504.0f, 1e-3f, -3e-2f};
  for (int i = 0; i < 1000; ++i) values.push_back(value(random));
  std::vector<std::uint16_t> halves(values.size());
  ToHalf(values, halves);
  std::vector<float> back(values.size(), 0.0f);
  AddHalves(halves, back);
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_LE(std::abs(back[i] - values[i]), std::abs(values[i]) * std::ldexp(1.0f, -11))
        << values[i];
  }
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(back[i], values[i]) << "representable";
  std::vector<float> rounded = values;
  RoundThroughHalf(rounded);
  EXPECT_EQ(rounded, back) << "RoundThroughHalf is what the wire delivers";
  EXPECT_NE(back, values) << "most values are not halves";
}

TEST(TrainTopKTest, CountsAtLeastOneAndAtMostAll) {
  EXPECT_EQ(TopKCount(10, 0.01), 1);
  EXPECT_EQ(TopKCount(10, 0.25), 3);
  EXPECT_EQ(TopKCount(10, 1.0), 10);
  EXPECT_EQ(TopKCount(0, 0.5), 0);
}

// Integer-valued gradients, so every sum below is exact in float32.
TEST(TrainTopKTest, ErrorFeedbackKeepsTheDroppedGradientMass) {
  constexpr int kElements = 37;
  ErrorFeedbackTopK topk(kElements, 0.2);
  ASSERT_EQ(topk.k(), 8);
  std::mt19937 random(3);
  std::uniform_int_distribution<int> value(-8, 8);
  std::vector<float> total_gradient(kElements, 0.0f), total_sent(kElements, 0.0f);
  for (int step = 0; step < 6; ++step) {
    std::vector<float> gradient(kElements);
    for (float& g : gradient) g = static_cast<float>(value(random));
    std::vector<float> accumulated(topk.residual().begin(), topk.residual().end());
    for (int i = 0; i < kElements; ++i) accumulated[i] += gradient[i];
    std::vector<std::uint32_t> indices(topk.k());
    std::vector<float> values(topk.k());
    topk.Select(gradient, indices, values);
    std::vector<float> sent(kElements, 0.0f);
    for (std::size_t j = 0; j < indices.size(); ++j) {
      if (j > 0) {
        EXPECT_LT(indices[j - 1], indices[j]) << "ascending, no repeats";
      }
      sent[indices[j]] = values[j];
    }
    float smallest_sent = INFINITY, largest_kept = 0;
    for (int i = 0; i < kElements; ++i) {
      EXPECT_EQ(sent[i] + topk.residual()[i], accumulated[i]) << "step " << step << ", " << i;
      total_gradient[i] += gradient[i];
      total_sent[i] += sent[i];
    }
    for (float v : values) smallest_sent = std::min(smallest_sent, std::abs(v));
    for (float r : topk.residual()) largest_kept = std::max(largest_kept, std::abs(r));
    EXPECT_GE(smallest_sent, largest_kept) << "the largest are sent";
  }
  for (int i = 0; i < kElements; ++i) {
    EXPECT_EQ(total_sent[i] + topk.residual()[i], total_gradient[i]) << i;
  }
}

class TrainCompressedAllReduceTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TrainCompressedAllReduceTest, Fp16EqualsOneWorkerWithinHalfPrecision) {
  const Dataset data = ToyData();
  const Collective& collective = *FindCollective(GetParam());
  const auto fp16 = TrainOverAllReduce(collective, data, Config("sgd", kBatch), 3,
                                       *ParseCompression("fp16"), /*bucket_bytes=*/40);
  const std::vector<float> alone = TrainAlone(data, "sgd", 3);
  ExpectEveryWorkerNear(fp16, alone, kFp16TrainingTolerance);
  EXPECT_EQ(fp16[0], fp16[2]) << "every rank sums the same halves in the same order";
}

TEST_P(TrainCompressedAllReduceTest, TopKOfEverythingEqualsNoCompression) {
  const Dataset data = ToyData();
  const Collective& collective = *FindCollective(GetParam());
  const auto all = TrainOverAllReduce(collective, data, Config("momentum", kBatch), 3,
                                      *ParseCompression("topk:1.0"), /*bucket_bytes=*/40);
  ExpectEveryWorkerNear(all, TrainAlone(data, "momentum", 3));
}

TEST_P(TrainCompressedAllReduceTest, TopKKeepsEveryRankEqualAndTrains) {
  const Dataset data = ToyData();
  const Collective& collective = *FindCollective(GetParam());
  const TrainConfig config = Config("sgd", kBatch);
  const auto sparse =
      TrainOverAllReduce(collective, data, config, 3, *ParseCompression("topk:0.1"));
  EXPECT_EQ(sparse[0], sparse[1]);
  EXPECT_EQ(sparse[0], sparse[2]);
  EXPECT_NE(sparse[0], Mlp(WorkerTrainer::LayerSizes(config, data)).InitialParameters(1));
}

INSTANTIATE_TEST_SUITE_P(Schedules, TrainCompressedAllReduceTest,
                         ::testing::Values("ring", "halving-doubling"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

// The bytes are the compressed ones: at N = 2 each rank sends its chunk once
// and receives the other's, against ring's whole float32 gradient each way.
TEST(TrainCompressedAllReduceBytesTest, PayloadIsTheCompressedChunks) {
  const Dataset data = ToyData();
  const TrainConfig config = Config("sgd", kBatch);
  const std::uint64_t parameters =
      static_cast<std::uint64_t>(Mlp(WorkerTrainer::LayerSizes(config, data)).parameter_count());
  const Collective& ring = *FindCollective("ring");
  std::uint64_t none = 0, fp16 = 0, topk = 0;
  TrainOverAllReduce(ring, data, config, 2, {}, 0, &none);
  TrainOverAllReduce(ring, data, config, 2, *ParseCompression("fp16"), 0, &fp16);
  TrainOverAllReduce(ring, data, config, 2, *ParseCompression("topk:0.1"), 0, &topk);
  EXPECT_EQ(none, kSteps * 2 * 4 * parameters);
  EXPECT_EQ(fp16, kSteps * 2 * 4 * ((parameters + 1) / 2));
  EXPECT_EQ(topk, kSteps * 2 * 8 * static_cast<std::uint64_t>(TopKCount(static_cast<std::int64_t>(parameters), 0.1)));
}

// The parameter server gets the compressed gradient decoded (dense float32).
std::vector<std::vector<float>> TrainOverParameterServer(const Dataset& data,
                                                         const TrainConfig& config, int workers,
                                                         const std::string& compress) {
  const Credentials credentials{"train", "secret"};
  absl::StatusOr<std::unique_ptr<InProcessShard>> shard =
      InProcessShard::Start(credentials, std::chrono::seconds(20));
  EXPECT_TRUE(shard.ok()) << shard.status();
  if (!shard.ok()) return {};
  std::vector<std::unique_ptr<PsClient>> clients;
  for (int rank = 0; rank < workers; ++rank) {
    clients.push_back(std::make_unique<PsClient>(std::vector{(*shard)->address()}, credentials,
                                                 std::chrono::seconds(20)));
  }
  const proto::Optimizer rule = *TrainingOptimizer(config, workers);
  return Train(data, config, workers, [&](int rank, WorkerTrainer& trainer) {
    absl::StatusOr<std::unique_ptr<PsSync>> sync =
        PsSync::Create(*clients[rank], "params", static_cast<std::uint32_t>(rank), workers,
                       trainer.parameters(), rule, *ParseCompression(compress));
    EXPECT_TRUE(sync.ok()) << sync.status();
    return sync.ok() ? std::unique_ptr<GradientSync>(*std::move(sync)) : nullptr;
  });
}

TEST(TrainCompressedParameterServerTest, Fp16AndTopKOfEverything) {
  const Dataset data = ToyData();
  const TrainConfig config = Config("sgd", kBatch);
  const std::vector<float> alone = TrainAlone(data, "sgd", 3);
  ExpectEveryWorkerNear(TrainOverParameterServer(data, config, 3, "topk:1"), alone);
  ExpectEveryWorkerNear(TrainOverParameterServer(data, config, 3, "fp16"), alone,
                        kFp16TrainingTolerance);
  const auto sparse = TrainOverParameterServer(data, config, 3, "topk:0.1");
  ASSERT_EQ(sparse.size(), 3u);
  EXPECT_EQ(sparse[0], sparse[2]) << "every worker pulls the same parameters";
}

}  // namespace
}  // namespace testbed
