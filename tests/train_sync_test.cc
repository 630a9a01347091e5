// Data-parallel training is single-process training with the global batch:
// N workers with batch B, synchronised through the parameter server (SGD,
// momentum, Adam on the shard, averaged) or any scheduled all-reduce of the
// registry, hold after K steps the parameters one worker holds after K steps
// with batch N*B (worker/train/batch_sampler.h gives them the same samples).
//
// Tolerance: 1e-5 absolute on parameters of order 1. The sums differ only in
// the order of float additions (rank order, ring order, the shard's order)
// and the parameter server adds a displacement to the initial values
// instead of updating them in place: a few float32 roundings (1.2e-7 each)
// per step, over K = 5 steps. A wrong average (sum instead of mean), a
// worker training on the wrong samples or a skipped step is off by 1e-3 or
// more.
//
// Also: training is deterministic given the seed (bit for bit, over the
// in-process transport), and a different seed trains differently.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "allreduce/collective.h"
#include "allreduce/transport/inprocess_transport.h"
#include "server/in_process_shard.h"
#include "tests/toy_training.h"
#include "worker/ps_client.h"
#include "worker/train/allreduce_sync.h"
#include "worker/train/ps_sync.h"
#include "worker/train/worker_trainer.h"

namespace testbed {
namespace {

using namespace toy_training;  // NOLINT: the shared toy setup

// Every scheduled all-reduce of the registry, at world sizes with and without
// a power of two (butterfly and halving-doubling fold the extra ranks).
class AllReduceTrainingTest
    : public ::testing::TestWithParam<std::tuple<const Collective*, int, std::string>> {};

TEST_P(AllReduceTrainingTest, EqualsOneWorkerWithTheGlobalBatch) {
  const auto& [collective, workers, optimizer] = GetParam();
  const Dataset data = ToyData();
  const std::vector<float> alone = TrainAlone(data, optimizer, workers);
  ASSERT_NE(alone, Mlp(WorkerTrainer::LayerSizes(Config(optimizer, kBatch), data))
                       .InitialParameters(1))
      << "training must move the parameters";
  ExpectEveryWorkerNear(TrainOverAllReduce(*collective, data, Config(optimizer, kBatch), workers),
                        alone);
}

INSTANTIATE_TEST_SUITE_P(
    Registry, AllReduceTrainingTest,
    ::testing::Combine(::testing::ValuesIn(CollectivesOf(Kinds::kScheduledAllReduce)),
                       ::testing::Values(3, 4), ::testing::Values("sgd", "momentum")),
    [](const auto& info) {
      std::string name = std::string(std::get<0>(info.param)->name) + "_" +
                         std::to_string(std::get<1>(info.param)) + "_" + std::get<2>(info.param);
      for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

// A parameter-server shard (or two) served from this process on loopback.
class PsTrainingTest : public ::testing::TestWithParam<std::tuple<int, int, std::string>> {
 protected:
  void SetUp() override {
    for (int s = 0; s < std::get<1>(GetParam()); ++s) {
      absl::StatusOr<std::unique_ptr<InProcessShard>> shard =
          InProcessShard::Start(kCredentials, std::chrono::seconds(20));
      ASSERT_TRUE(shard.ok()) << shard.status();
      addresses_.push_back((*shard)->address());
      shards_.push_back(*std::move(shard));
    }
  }

  const Credentials kCredentials{"train", "secret"};
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<InProcessShard>> shards_;  // stopped when destroyed
};

TEST_P(PsTrainingTest, EqualsOneWorkerWithTheGlobalBatch) {
  // Not a structured binding: clang 14 (the sanitized build's) cannot capture
  // one. The shards are the fixture's (SetUp).
  const int workers = std::get<0>(GetParam());
  const std::string& optimizer = std::get<2>(GetParam());
  const Dataset data = ToyData();
  const TrainConfig config = Config(optimizer, kBatch);
  const proto::Optimizer rule =
      *OptimizerConfig(config.optimizer, config.learning_rate, config.momentum);
  std::vector<std::unique_ptr<PsClient>> clients;
  for (int rank = 0; rank < workers; ++rank) {
    clients.push_back(std::make_unique<PsClient>(addresses_, kCredentials, std::chrono::seconds(20)));
  }
  const std::vector<std::vector<float>> trained =
      Train(data, config, workers, [&](int rank, WorkerTrainer& trainer) {
        absl::StatusOr<std::unique_ptr<PsSync>> sync =
            PsSync::Create(*clients[rank], "params", static_cast<std::uint32_t>(rank), workers,
                           trainer.parameters(), rule);
        EXPECT_TRUE(sync.ok()) << sync.status();
        return sync.ok() ? std::unique_ptr<GradientSync>(*std::move(sync)) : nullptr;
      });
  ExpectEveryWorkerNear(trained, TrainAlone(data, optimizer, workers));
}

INSTANTIATE_TEST_SUITE_P(WorkersShardsOptimizers, PsTrainingTest,
                         ::testing::Combine(::testing::Values(1, 3), ::testing::Values(1, 2),
                                            ::testing::Values("sgd", "momentum", "adam")));

// The parameter server with buckets: one tensor per bucket (40 bytes: ten
// floats each, the last shorter), pushed and pulled last to first, on the
// worker's thread or, with overlap, on a communication thread while
// backpropagation still runs. A shard sums a chunk in worker order whenever
// its pushes arrive, so overlap changes nothing, bit for bit.
class PsBucketsTest : public PsTrainingTest {
 protected:
  std::vector<std::vector<float>> TrainBucketed(const Dataset& data, int workers,
                                                const std::string& tensor, PsBuckets buckets) {
    const TrainConfig config = Config("momentum", kBatch);
    const proto::Optimizer rule =
        *OptimizerConfig(config.optimizer, config.learning_rate, config.momentum);
    std::vector<std::unique_ptr<PsClient>> clients;
    for (int rank = 0; rank < workers; ++rank) {
      clients.push_back(
          std::make_unique<PsClient>(addresses_, kCredentials, std::chrono::seconds(20)));
    }
    return Train(data, config, workers, [&](int rank, WorkerTrainer& trainer) {
      absl::StatusOr<std::unique_ptr<PsSync>> sync =
          PsSync::Create(*clients[rank], tensor, static_cast<std::uint32_t>(rank), workers,
                         trainer.parameters(), rule, {}, {}, buckets);
      EXPECT_TRUE(sync.ok()) << sync.status();
      return sync.ok() ? std::unique_ptr<GradientSync>(*std::move(sync)) : nullptr;
    });
  }
};

// (How much of the pushes ran hidden depends on timing: bucket_pipeline_test
// counts it deterministically.)
TEST_P(PsBucketsTest, OverlapGivesExactlyTheParametersOfTheSameBucketsWithout) {
  const auto& [workers, shards, optimizer] = GetParam();
  const Dataset data = ToyData();
  const auto with = TrainBucketed(data, workers, "with", {.bytes = 40, .overlap = true});
  EXPECT_EQ(with, TrainBucketed(data, workers, "without", {.bytes = 40}));
  ExpectEveryWorkerNear(with, TrainAlone(data, "momentum", workers));
}

INSTANTIATE_TEST_SUITE_P(WorkersShards, PsBucketsTest,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Values(1, 2),
                                            ::testing::Values("momentum")));

// A shard that stops mid-training fails the workers' next step with the
// server named: the pipeline's thread reports the failure instead of hanging.
TEST_P(PsBucketsTest, AStoppedShardFailsTheOverlappedStep) {
  const int workers = std::get<0>(GetParam());  // the workers, which a lambda captures
  const Dataset data = ToyData();
  const TrainConfig config = Config("sgd", kBatch);
  const proto::Optimizer rule = *OptimizerConfig("sgd", config.learning_rate, 0);
  std::vector<std::unique_ptr<PsClient>> clients;
  std::vector<std::unique_ptr<WorkerTrainer>> trainers;
  std::vector<std::unique_ptr<PsSync>> syncs;
  for (int rank = 0; rank < workers; ++rank) {
    clients.push_back(std::make_unique<PsClient>(addresses_, kCredentials, std::chrono::seconds(5)));
    trainers.push_back(std::make_unique<WorkerTrainer>(config, data, rank, workers));
    auto sync = PsSync::Create(*clients[rank], "stop", static_cast<std::uint32_t>(rank), workers,
                               trainers[rank]->parameters(), rule, {}, {},
                               {.bytes = 40, .overlap = true});
    ASSERT_TRUE(sync.ok()) << sync.status();
    syncs.push_back(*std::move(sync));
  }
  std::vector<absl::Status> ends(workers);
  const auto run_steps = [&](int steps) {
    std::vector<std::thread> threads;
    for (int rank = 0; rank < workers; ++rank) {
      threads.emplace_back([&, rank] {
        for (int step = 0; step < steps && ends[rank].ok(); ++step) {
          ends[rank] = trainers[rank]->Step(*syncs[rank]).status();
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
  };
  run_steps(2);
  for (const absl::Status& end : ends) ASSERT_TRUE(end.ok()) << end;
  shards_.back().reset();  // the last shard goes away
  run_steps(1);
  for (int rank = 0; rank < workers; ++rank) {
    EXPECT_FALSE(ends[rank].ok()) << "rank " << rank;
    EXPECT_NE(ends[rank].message().find("parameter server, step 3"), std::string::npos)
        << ends[rank];
  }
}

TEST(TrainingDeterminismTest, TheSameSeedTrainsTheSameParametersBitForBit) {
  const Dataset data = ToyData();
  const Collective& ring = *FindCollective("ring");
  const auto first = TrainOverAllReduce(ring, data, Config("adam", kBatch, 5), 3);
  const auto second = TrainOverAllReduce(ring, data, Config("adam", kBatch, 5), 3);
  EXPECT_EQ(first, second);
  EXPECT_EQ(first[0], first[2]) << "every worker holds the same parameters";
  EXPECT_NE(first, TrainOverAllReduce(ring, data, Config("adam", kBatch, 6), 3));
}

TEST(AllReduceSyncTest, BucketsGiveTheSameParametersAsOneAllReduce) {
  const Dataset data = ToyData();
  const TrainConfig config = Config("sgd", kBatch);
  const proto::Optimizer rule = *OptimizerConfig("sgd", config.learning_rate, 0);
  InProcessFabric fabric(2);
  std::vector<std::unique_ptr<Transport>> transports;
  for (int rank = 0; rank < 2; ++rank) transports.push_back(fabric.Connect(rank));
  const auto bucketed = Train(data, config, 2, [&](int rank, WorkerTrainer& trainer) {
    // 40-byte buckets: ten floats each, the last one shorter.
    auto sync = AllReduceSync::Create(*FindCollective("ring"), *transports[rank],
                                      trainer.model().parameter_count(), 40, rule);
    EXPECT_TRUE(sync.ok()) << sync.status();
    return sync.ok() ? std::unique_ptr<GradientSync>(*std::move(sync)) : nullptr;
  });
  ExpectEveryWorkerNear(bucketed, TrainAlone(data, "sgd", 2));
}

// Overlap all-reduces the buckets on a thread of their own, from the last to
// the first, while backpropagation still runs: the same sums as without it,
// bit for bit, so the same parameters.
std::vector<std::vector<float>> TrainBucketed(const Collective& collective, const Dataset& data,
                                              int workers, bool overlap) {
  const TrainConfig config = Config("momentum", kBatch);
  const proto::Optimizer rule =
      *OptimizerConfig(config.optimizer, config.learning_rate, config.momentum);
  InProcessFabric fabric(workers);
  std::vector<std::unique_ptr<Transport>> transports;
  for (int rank = 0; rank < workers; ++rank) transports.push_back(fabric.Connect(rank));
  return Train(data, config, workers, [&](int rank, WorkerTrainer& trainer) {
    auto sync = AllReduceSync::Create(collective, *transports[rank],
                                      trainer.model().parameter_count(), 40, rule, overlap);
    EXPECT_TRUE(sync.ok()) << sync.status();
    return sync.ok() ? std::unique_ptr<GradientSync>(*std::move(sync)) : nullptr;
  });
}

TEST(AllReduceSyncTest, OverlapGivesExactlyTheParametersOfTheSameBucketsWithout) {
  const Dataset data = ToyData();
  for (const char* name : {"ring", "halving-doubling"}) {
    const Collective& collective = *FindCollective(name);
    const auto overlapped = TrainBucketed(collective, data, 3, true);
    EXPECT_EQ(overlapped, TrainBucketed(collective, data, 3, false)) << name;
    ExpectEveryWorkerNear(overlapped, TrainAlone(data, "momentum", 3));
  }
}

// A worker that dies mid-training (here: rank 1 in its third step) makes the
// others' steps fail with a lost connection, with or without overlap,
// instead of hanging until a deadline. A worker whose step failed is gone
// too (the local deployment closes its transport; a process would exit), so
// a survivor may learn of the loss through the other survivor: each names a
// lost rank, and one of them names rank 1.
class DyingSync final : public GradientSync {
 public:
  DyingSync(std::unique_ptr<GradientSync> inner, InProcessFabric& fabric, int rank)
      : inner_(std::move(inner)), fabric_(fabric), rank_(rank) {}
  void BeginBackward(std::uint64_t step, std::span<float> gradient) override {
    inner_->BeginBackward(step, gradient);
  }
  void GradientReadyFrom(std::int64_t offset) override { inner_->GradientReadyFrom(offset); }
  absl::Status Step(std::uint64_t step, std::span<float> gradient,
                    std::span<float> parameters) override {
    if (rank_ == 1 && step == 3) {
      fabric_.MarkLost(1);
      return absl::AbortedError("killed");
    }
    return inner_->Step(step, gradient, parameters);
  }
  std::uint64_t PayloadBytes() const override { return inner_->PayloadBytes(); }

 private:
  std::unique_ptr<GradientSync> inner_;
  InProcessFabric& fabric_;
  const int rank_;
};

TEST(AllReduceSyncTest, ALostWorkerFailsTheOthersStepsNamingIt) {
  const Dataset data = ToyData();
  const TrainConfig config = Config("sgd", kBatch);
  const proto::Optimizer rule = *OptimizerConfig("sgd", config.learning_rate, 0);
  for (bool overlap : {false, true}) {
    InProcessFabric fabric(3, std::chrono::seconds(20));
    std::vector<std::unique_ptr<Transport>> transports;
    for (int rank = 0; rank < 3; ++rank) transports.push_back(fabric.Connect(rank));
    std::vector<absl::Status> ends(3);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 3; ++rank) {
      threads.emplace_back([&, rank] {
        WorkerTrainer trainer(config, data, rank, 3);
        auto inner = AllReduceSync::Create(*FindCollective("ring"), *transports[rank],
                                           trainer.model().parameter_count(), 40, rule, overlap);
        ASSERT_TRUE(inner.ok()) << inner.status();
        {
          DyingSync sync(*std::move(inner), fabric, rank);
          for (int step = 0; step < kSteps && ends[rank].ok(); ++step) {
            ends[rank] = trainer.Step(sync).status();
          }
        }
        if (!ends[rank].ok()) fabric.MarkLost(rank);
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(ends[1].code(), absl::StatusCode::kAborted);
    int naming_rank_1 = 0;
    for (int rank : {0, 2}) {
      EXPECT_EQ(ends[rank].code(), absl::StatusCode::kUnavailable)
          << "rank " << rank << ", overlap " << overlap << ": " << ends[rank];
      EXPECT_NE(ends[rank].message().find("lost connection to rank"), std::string::npos)
          << "rank " << rank << ", overlap " << overlap << ": " << ends[rank];
      EXPECT_NE(ends[rank].message().find("step 3"), std::string::npos) << ends[rank];
      if (ends[rank].message().find("lost connection to rank 1") != std::string::npos) {
        ++naming_rank_1;
      }
    }
    EXPECT_GE(naming_rank_1, 1) << "overlap " << overlap;
  }
}

TEST(AllReduceSyncTest, RefusesACollectiveThatIsNotAScheduledAllReduce) {
  InProcessFabric fabric(1);
  std::unique_ptr<Transport> transport = fabric.Connect(0);
  const proto::Optimizer rule = *OptimizerConfig("sgd", 0.1, 0);
  for (const char* name : {"ps", "reduce-scatter"}) {
    ASSERT_NE(FindCollective(name), nullptr) << name;
    auto sync = AllReduceSync::Create(*FindCollective(name), *transport, 10, 0, rule);
    EXPECT_EQ(sync.status().code(), absl::StatusCode::kInvalidArgument) << name;
  }
}

// --lr-scaling linear: N workers at rate N * lr equal one worker with the
// global batch at N * lr (Goyal et al.'s rule, from the same equivalence).
TEST(TrainLearningRateScalingTest, LinearScalingIsTheRateTimesN) {
  const Dataset data = ToyData();
  TrainConfig scaled = Config("momentum", kBatch);
  scaled.lr_scaling = proto::LrScaling::linear;
  EXPECT_DOUBLE_EQ(TrainingOptimizer(scaled, 3)->learning_rate(), 3 * scaled.learning_rate);
  TrainConfig alone = Config("momentum", kBatch * 3);
  alone.learning_rate *= 3;
  ExpectEveryWorkerNear(TrainOverAllReduce(*FindCollective("ring"), data, scaled, 3),
                        TrainOverAllReduce(*FindCollective("ring"), data, alone, 1)[0]);
}

TEST(TrainLearningRateScalingTest, RefusesUnknownScalingAndWarmupWithAdam) {
  TrainConfig config = Config("sgd", kBatch);
  config.lr_scaling = static_cast<proto::LrScaling::Kind>(7);  // a number no word names
  absl::StatusOr<proto::Optimizer> unknown = TrainingOptimizer(config, 2);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown lr_scaling 7"), std::string::npos);
  config = Config("adam", kBatch);
  config.warmup_steps = 3;
  absl::StatusOr<proto::Optimizer> adam = TrainingOptimizer(config, 2);
  ASSERT_FALSE(adam.ok());
  EXPECT_NE(adam.status().message().find("--warmup-steps"), std::string::npos);
}

// What the trainer asks of its sync each step.
class RecordingSync final : public GradientSync {
 public:
  absl::Status Step(std::uint64_t, std::span<float>, std::span<float>) override {
    factors.push_back(learning_rate_factor());
    return absl::OkStatus();
  }
  std::uint64_t PayloadBytes() const override { return 0; }
  std::vector<float> factors;
};

TEST(TrainLearningRateScalingTest, WarmupRampsTheRateLinearly) {
  EXPECT_FLOAT_EQ(WarmupFactor(1, 4), 0.25f);
  EXPECT_FLOAT_EQ(WarmupFactor(4, 4), 1.0f);
  EXPECT_FLOAT_EQ(WarmupFactor(9, 0), 1.0f);
  const Dataset data = ToyData();
  TrainConfig config = Config("sgd", kBatch);
  config.warmup_steps = 4;
  WorkerTrainer trainer(config, data, 0, 1);
  RecordingSync sync;
  for (int step = 0; step < kSteps; ++step) ASSERT_TRUE(trainer.Step(sync).ok());
  EXPECT_EQ(sync.factors, (std::vector<float>{0.25f, 0.5f, 0.75f, 1.0f, 1.0f}));
}

// The factor scales the step's update: with SGD, exactly the rate.
TEST(TrainLearningRateScalingTest, AFactorScalesTheUpdateOfEitherSync) {
  InProcessFabric fabric(1);
  std::unique_ptr<Transport> transport = fabric.Connect(0);
  const proto::Optimizer rule = *OptimizerConfig("sgd", 0.5, 0);
  auto sync = AllReduceSync::Create(*FindCollective("ring"), *transport, 3, 0, rule);
  ASSERT_TRUE(sync.ok()) << sync.status();
  std::vector<float> gradient = {4, -8, 2}, parameters = {1, 1, 1};
  (*sync)->SetLearningRateFactor(0.25f);
  ASSERT_TRUE((*sync)->Step(1, gradient, parameters).ok());
  EXPECT_EQ(parameters, (std::vector<float>{0.5f, 2.0f, 0.75f}));  // 1 - 0.5 * 0.25 * g

  const Credentials credentials{"train", "secret"};
  auto shard = InProcessShard::Start(credentials, std::chrono::seconds(20));
  ASSERT_TRUE(shard.ok()) << shard.status();
  PsClient client({(*shard)->address()}, credentials, std::chrono::seconds(20));
  const std::vector<float> initial = {1, 1, 1};
  auto ps = PsSync::Create(client, "params", 0, 1, initial, rule);
  ASSERT_TRUE(ps.ok()) << ps.status();
  gradient = {4, -8, 2};
  (*ps)->SetLearningRateFactor(0.25f);
  ASSERT_TRUE((*ps)->Step(1, gradient, parameters).ok());
  EXPECT_EQ(parameters, (std::vector<float>{0.5f, 2.0f, 0.75f}));
}

TEST(OptimizerConfigTest, RefusesUnknownOptimizersNamingTheKnownOnes) {
  EXPECT_TRUE(OptimizerConfig("adam", 0.1, 0).ok());
  absl::StatusOr<proto::Optimizer> unknown = OptimizerConfig("adagrad", 0.1, 0);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("sgd, momentum, adam"), std::string::npos);
  EXPECT_FALSE(OptimizerConfig("none", 0.1, 0).ok());
}

}  // namespace
}  // namespace testbed
