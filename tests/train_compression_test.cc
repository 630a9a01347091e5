// --compress: fp16 and top-k with error feedback, through the all-reduce
// (fp16: the bucket's own all-reduce of halves, rounded to half at every
// hop; top-k: an all-gather of every rank's pairs, summed in float32) and
// the parameter server (fp16: pushes travel as halves, the shard widens
// them; top-k: as (index, value) pairs, which the shard scatters).
//
// Tolerances:
//  - a half keeps 11 significant bits: a round trip is off by at most 2^-11
//    of the value (round to nearest), for values in half's normal range;
//  - fp16 training, N = 3, K = 5 steps of SGD at rate 0.2 on the toy data:
//    every element each worker sends is off by at most 2^-11 of itself, and
//    each of the N - 1 additions of the all-reduce of halves rounds its
//    partial sum by at most 2^-11 of it again, so each step's update is off
//    by well under 0.1% of its size. Parameters end within 3.4e-5 of one
//    worker's uncompressed training (measured for ring, tree, butterfly and
//    halving-doubling; 2.3e-5 when the halves were gathered and summed in
//    float32; the largest parameter is 0.84); 2e-4 leaves six times that. A
//    sum instead of a mean, or a dropped worker, is off by 1e-2 or more;
//  - top-k bookkeeping is exact: elements are moved, never split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "allreduce/traffic.h"
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
  FromHalf(halves, back);
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
  EXPECT_EQ(fp16[0], fp16[2]) << "every rank holds the same all-reduced halves";
}

// fp16 runs each bucket's own all-reduce on halves, so its payload is the
// collective's closed form for M = 2 bytes an element - half of the float32
// run's, whatever N and the buckets. Each rank's PayloadBytes counts what it
// sent and received, so over all ranks every byte is counted twice. N = 3:
// chunks that do not divide evenly, and butterfly's fold.
TEST_P(TrainCompressedAllReduceTest, Fp16PayloadIsTheClosedFormForHalves) {
  constexpr int kWorkers = 3;
  const Dataset data = ToyData();
  const TrainConfig config = Config("sgd", kBatch);
  const Collective& collective = *FindCollective(GetParam());
  const auto parameters = Mlp(WorkerTrainer::LayerSizes(config, data)).parameter_count();
  for (std::size_t bucket_bytes : {std::size_t{0}, std::size_t{40}}) {
    SCOPED_TRACE("bucket_bytes " + std::to_string(bucket_bytes));
    // The closed forms of the buckets' all-reduces, per step, at M bytes an element.
    const auto closed_form = [&](std::int64_t element_bytes) {
      const std::int64_t per_bucket =
          bucket_bytes == 0 ? parameters : static_cast<std::int64_t>(bucket_bytes / 4);
      std::int64_t total = 0;
      for (std::int64_t offset = 0; offset < parameters; offset += per_bucket) {
        const std::int64_t elements = std::min(per_bucket, parameters - offset);
        total += collective.formula_bytes(kWorkers, element_bytes * elements);
      }
      return static_cast<std::uint64_t>(total);
    };
    std::vector<std::uint64_t> fp16, none;
    TrainOverAllReduce(collective, data, config, kWorkers, *ParseCompression("fp16"), bucket_bytes,
                       nullptr, &fp16);
    TrainOverAllReduce(collective, data, config, kWorkers, {}, bucket_bytes, nullptr, &none);
    const auto sum = [](const std::vector<std::uint64_t>& v) {
      return std::accumulate(v.begin(), v.end(), std::uint64_t{0});
    };
    EXPECT_EQ(sum(fp16), kSteps * 2 * closed_form(2));
    EXPECT_EQ(sum(none), kSteps * 2 * closed_form(4));
    EXPECT_EQ(2 * sum(fp16), sum(none));
    if (bucket_bytes == 0) {  // rank 0 alone: its share, as counted off the schedule
      const RankTraffic rank0 =
          CountTraffic(collective, kWorkers, 2 * parameters, 2).per_rank[0];
      EXPECT_EQ(fp16[0], kSteps * static_cast<std::uint64_t>(rank0.bytes_sent +
                                                             rank0.bytes_received));
    }
  }
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
                         ::testing::Values("ring", "tree", "butterfly", "halving-doubling"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

// The bytes are the compressed ones: at N = 2 a ring rank sends and receives
// the whole gradient once, in floats (none) or halves (fp16), or its k pairs
// (top-k's all-gather).
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
  EXPECT_EQ(fp16, kSteps * 2 * 2 * parameters);
  EXPECT_EQ(topk, kSteps * 2 * 8 * static_cast<std::uint64_t>(TopKCount(static_cast<std::int64_t>(parameters), 0.1)));
}

// fp16 as PsSync pushed it before the FP16 push encoding: rounded through
// half on the worker, then pushed as dense float32 (the learning-rate factor
// is 1 here, so rounding before PsSync's scaling is rounding after it).
class DecodedFp16Sync final : public GradientSync {
 public:
  explicit DecodedFp16Sync(std::unique_ptr<PsSync> dense) : dense_(std::move(dense)) {}
  absl::Status Step(std::uint64_t step, std::span<float> gradient,
                    std::span<float> parameters) override {
    RoundThroughHalf(gradient);
    return dense_->Step(step, gradient, parameters);
  }
  std::uint64_t PayloadBytes() const override { return dense_->PayloadBytes(); }

 private:
  std::unique_ptr<PsSync> dense_;
};

// top-k as PsSync pushed it before the SPARSE push encoding: all but the k
// largest zeroed (error feedback as ever), then pushed as dense float32.
class DecodedTopKSync final : public GradientSync {
 public:
  DecodedTopKSync(std::unique_ptr<PsSync> dense, std::int64_t elements, double ratio)
      : dense_(std::move(dense)), topk_(elements, ratio), indices_(topk_.k()), values_(topk_.k()) {}
  absl::Status Step(std::uint64_t step, std::span<float> gradient,
                    std::span<float> parameters) override {
    topk_.Select(gradient, indices_, values_);
    std::fill(gradient.begin(), gradient.end(), 0.0f);
    for (std::size_t j = 0; j < indices_.size(); ++j) gradient[indices_[j]] = values_[j];
    return dense_->Step(step, gradient, parameters);
  }
  std::uint64_t PayloadBytes() const override { return dense_->PayloadBytes(); }

 private:
  std::unique_ptr<PsSync> dense_;
  ErrorFeedbackTopK topk_;
  std::vector<std::uint32_t> indices_;
  std::vector<float> values_;
};

// Through one in-process shard. `decoded`: the compression of before the
// push encodings (DecodedFp16Sync, DecodedTopKSync), for comparison.
std::vector<std::vector<float>> TrainOverParameterServer(const Dataset& data,
                                                         const TrainConfig& config, int workers,
                                                         const std::string& compress,
                                                         bool decoded = false,
                                                         std::uint64_t* payload_bytes = nullptr) {
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
  return Train(
      data, config, workers,
      [&](int rank, WorkerTrainer& trainer) -> std::unique_ptr<GradientSync> {
        absl::StatusOr<std::unique_ptr<PsSync>> sync =
            PsSync::Create(*clients[rank], "params", static_cast<std::uint32_t>(rank), workers,
                           trainer.parameters(), rule,
                           *ParseCompression(decoded ? "none" : compress));
        EXPECT_TRUE(sync.ok()) << sync.status();
        if (!sync.ok()) return nullptr;
        if (!decoded) return *std::move(sync);
        const CompressionConfig config = *ParseCompression(compress);
        if (config.kind == CompressionConfig::Kind::kTopK) {
          return std::make_unique<DecodedTopKSync>(
              *std::move(sync), static_cast<std::int64_t>(trainer.parameters().size()),
              config.ratio);
        }
        return std::make_unique<DecodedFp16Sync>(*std::move(sync));
      },
      payload_bytes);
}

// fp16 on the wire changes the bytes, not the numbers: the shard sums the
// same half-rounded gradients the worker used to decode and push dense, so
// the parameters are bit-identical, and every push is exactly half as many
// bytes (M/2 pushed, M pulled per step, against M and M).
TEST(TrainCompressedParameterServerTest, Fp16OnTheWireIsTheDecodedPathAtHalfThePushBytes) {
  const Dataset data = ToyData();
  const TrainConfig config = Config("sgd", kBatch);
  const std::uint64_t parameters =
      static_cast<std::uint64_t>(Mlp(WorkerTrainer::LayerSizes(config, data)).parameter_count());
  std::uint64_t wire = 0, decoded = 0;
  const auto halves = TrainOverParameterServer(data, config, 3, "fp16", false, &wire);
  const auto before = TrainOverParameterServer(data, config, 3, "fp16", true, &decoded);
  ASSERT_EQ(halves.size(), 3u);
  ASSERT_EQ(before.size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(halves[rank], before[rank]) << "rank " << rank << ": not bit-identical";
  }
  EXPECT_EQ(decoded, kSteps * (4 + 4) * parameters);
  EXPECT_EQ(wire, kSteps * (2 + 4) * parameters);
  std::printf("ps fp16, %llu parameters, %d steps: worker 0 moved %llu payload bytes "
              "(decoded dense: %llu)\n",
              static_cast<unsigned long long>(parameters), kSteps,
              static_cast<unsigned long long>(wire), static_cast<unsigned long long>(decoded));
}

// top-k on the wire likewise: the shard scatters the k pairs into zeros and
// sums what the dense push of the zeroed gradient gave, bit for bit; a push
// is 8 bytes per kept element instead of 4 per element.
TEST(TrainCompressedParameterServerTest, TopKOnTheWireIsTheDecodedPathInPairs) {
  const Dataset data = ToyData();
  const TrainConfig config = Config("sgd", kBatch);
  const std::uint64_t parameters =
      static_cast<std::uint64_t>(Mlp(WorkerTrainer::LayerSizes(config, data)).parameter_count());
  const auto k = static_cast<std::uint64_t>(TopKCount(static_cast<std::int64_t>(parameters), 0.1));
  std::uint64_t wire = 0, decoded = 0;
  const auto pairs = TrainOverParameterServer(data, config, 3, "topk:0.1", false, &wire);
  const auto before = TrainOverParameterServer(data, config, 3, "topk:0.1", true, &decoded);
  ASSERT_EQ(pairs.size(), 3u);
  ASSERT_EQ(before.size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(pairs[rank], before[rank]) << "rank " << rank << ": not bit-identical";
  }
  EXPECT_EQ(decoded, kSteps * (4 + 4) * parameters);
  EXPECT_EQ(wire, kSteps * (8 * k + 4 * parameters)) << "no kept element is exactly zero here";
  std::printf("ps topk:0.1, %llu parameters, %d steps: worker 0 moved %llu payload bytes "
              "(decoded dense: %llu)\n",
              static_cast<unsigned long long>(parameters), kSteps,
              static_cast<unsigned long long>(wire), static_cast<unsigned long long>(decoded));
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
