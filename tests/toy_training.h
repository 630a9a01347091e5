// Toy data-parallel training for the train tests: 13 features, 4 classes, 40
// samples, a 9-7 hidden MLP, N workers on threads, each with the
// GradientSync a test makes, against one worker with the global batch.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "allreduce/collective.h"
#include "allreduce/transport/inprocess_transport.h"
#include "worker/train/allreduce_sync.h"
#include "worker/train/worker_trainer.h"

namespace testbed::toy_training {

inline constexpr int kSteps = 5;
inline constexpr int kBatch = 3;  // per worker
inline constexpr float kTolerance = 1e-5f;

// 13 features, 4 classes, 40 samples: with N*B = 12 an epoch is 3 steps, so
// K = 5 crosses into the second epoch's order.
inline Dataset ToyData() {
  std::mt19937 random(42);
  std::uniform_real_distribution<float> value(0.0f, 1.0f);
  Dataset data;
  data.classes = 4;
  data.inputs.resize(13, 40);
  for (int s = 0; s < 40; ++s) {
    for (int f = 0; f < 13; ++f) data.inputs(f, s) = value(random);
    data.labels.push_back(s % data.classes);
  }
  return data;
}

inline TrainConfig Config(const std::string& optimizer, int batch, std::uint64_t seed = 1) {
  TrainConfig config;
  config.hidden = {9, 7};
  config.batch = batch;
  config.optimizer = optimizer;
  config.learning_rate = optimizer == "adam" ? 0.01 : 0.2;
  config.momentum = 0.9;
  config.steps = kSteps;
  config.seed = seed;
  return config;
}

using MakeSync = std::function<std::unique_ptr<GradientSync>(int rank, WorkerTrainer& trainer)>;

// Trains N workers on threads for kSteps; returns each worker's parameters.
// `payload_bytes`, when given, gets worker 0's payload bytes after the steps;
// `payload_per_rank` every worker's.
inline std::vector<std::vector<float>> Train(
    const Dataset& data, const TrainConfig& config, int workers, const MakeSync& make_sync,
    std::uint64_t* payload_bytes = nullptr,
    std::vector<std::uint64_t>* payload_per_rank = nullptr) {
  std::vector<std::vector<float>> parameters(workers);
  if (payload_per_rank != nullptr) payload_per_rank->assign(workers, 0);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < workers; ++rank) {
    threads.emplace_back([&, rank] {
      WorkerTrainer trainer(config, data, rank, workers);
      std::unique_ptr<GradientSync> sync = make_sync(rank, trainer);
      if (sync == nullptr) return;
      for (int step = 0; step < kSteps; ++step) {
        absl::StatusOr<StepStats> stats = trainer.Step(*sync);
        if (!stats.ok()) {
          ADD_FAILURE() << "rank " << rank << ": " << stats.status();
          return;
        }
      }
      parameters[rank].assign(trainer.parameters().begin(), trainer.parameters().end());
      if (rank == 0 && payload_bytes != nullptr) *payload_bytes = sync->PayloadBytes();
      if (payload_per_rank != nullptr) (*payload_per_rank)[rank] = sync->PayloadBytes();
    });
  }
  for (std::thread& thread : threads) thread.join();
  return parameters;
}

// Over the in-process transport; the rate as TrainingOptimizer scales it.
inline std::vector<std::vector<float>> TrainOverAllReduce(
    const Collective& collective, const Dataset& data, const TrainConfig& config, int workers,
    CompressionConfig compression = {}, std::size_t bucket_bytes = 0,
    std::uint64_t* payload_bytes = nullptr,
    std::vector<std::uint64_t>* payload_per_rank = nullptr) {
  InProcessFabric fabric(workers);
  std::vector<std::unique_ptr<Transport>> transports;
  for (int rank = 0; rank < workers; ++rank) transports.push_back(fabric.Connect(rank));
  const proto::Optimizer optimizer = *TrainingOptimizer(config, workers);
  return Train(
      data, config, workers,
      [&](int rank, WorkerTrainer& trainer) {
        absl::StatusOr<std::unique_ptr<AllReduceSync>> sync = AllReduceSync::Create(
            collective, *transports[rank], trainer.model().parameter_count(), bucket_bytes,
            optimizer, /*overlap=*/false, compression);
        EXPECT_TRUE(sync.ok()) << sync.status();
        return sync.ok() ? std::unique_ptr<GradientSync>(*std::move(sync)) : nullptr;
      },
      payload_bytes, payload_per_rank);
}

// One worker with the global batch: what data-parallel training must equal.
inline std::vector<float> TrainAlone(const Dataset& data, const std::string& optimizer,
                                     int workers) {
  return TrainOverAllReduce(*FindCollective("ring"), data, Config(optimizer, kBatch * workers),
                            1)[0];
}

inline void ExpectEveryWorkerNear(const std::vector<std::vector<float>>& workers,
                                  const std::vector<float>& expected,
                                  float tolerance = kTolerance) {
  for (std::size_t rank = 0; rank < workers.size(); ++rank) {
    ASSERT_EQ(workers[rank].size(), expected.size()) << "rank " << rank;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      ASSERT_NEAR(workers[rank][i], expected[i], tolerance)
          << "rank " << rank << ", parameter " << i;
    }
  }
}

}  // namespace testbed::toy_training
