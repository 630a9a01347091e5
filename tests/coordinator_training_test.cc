// The coordinator's state machine running a training run (SubmitTraining):
// every rank prepared with the spec, rank 0's rows relayed, a lost rank, the
// run's deadline, its limits, and a parameter-server run's shards.
#include "server/coordinator_core.h"

#include <gtest/gtest.h>

#include "common/limits.h"
#include "tests/coordinator_core_fixture.h"

namespace testbed::core_testing {
namespace {

proto::TrainingSpec Training(int workers) {
  proto::TrainingSpec spec;
  spec.set_workers(workers);
  spec.set_sync("ring");
  spec.set_steps(10);
  spec.set_timeout_s(5);
  return spec;
}

proto::TrainingRow TrainingRowAt(std::uint64_t step, proto::TrainingRow::Kind kind) {
  proto::TrainingRow row;
  row.set_kind(kind);
  row.set_step(step);
  return row;
}

class TrainingCoreTest : public CoreTest {
 protected:
  // A training run of n_ workers, handshaken to kRunning.
  void Run(const proto::TrainingSpec& spec) {
    Attach(n_);
    const absl::StatusOr<std::uint64_t> id = core_.SubmitTraining(spec, seconds(30), now_);
    ASSERT_TRUE(id.ok()) << id.status();
    AllAddresses();
    AllReady();
    ASSERT_EQ(core_.state(), State::kRunning);
  }
};

TEST_F(TrainingCoreTest, EveryRankIsPreparedWithTheTrainingSpec) {
  Attach(n_);
  ASSERT_TRUE(core_.SubmitTraining(Training(n_), seconds(30), now_).ok());
  const std::vector<CoordinatorCore::Outgoing> out = core_.TakeMessages();
  ASSERT_EQ(out.size(), 3u);
  for (int r = 0; r < n_; ++r) {
    const proto::Prepare& prepare = out[r].message.prepare();
    EXPECT_EQ(prepare.rank(), static_cast<std::uint32_t>(r));
    EXPECT_EQ(prepare.world_size(), 3u);
    EXPECT_TRUE(prepare.has_training());
    EXPECT_EQ(prepare.training().steps(), 10u);
    EXPECT_FALSE(prepare.has_spec());
    EXPECT_TRUE(prepare.shard_addresses().empty());  // ring: no shards
  }
}

TEST_F(TrainingCoreTest, RankZerosRowsAreRelayedAndEveryFinishedEndsTheRun) {
  Run(Training(n_));
  const std::vector<std::string> sent = Sent();
  ASSERT_GE(sent.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(sent.end() - 3, sent.end()),
            (std::vector<std::string>{"0:start", "1:start", "2:start"}));
  ASSERT_TRUE(core_.TrainingRowReceived(0, TrainingRowAt(5, proto::TrainingRow::PROGRESS), now_).ok());
  proto::WorkerMessage message;
  *message.mutable_training_row() = TrainingRowAt(10, proto::TrainingRow::RUN);
  ASSERT_TRUE(core_.Deliver(0, message, now_).ok());
  // Only rank 0 reports: another rank's row is refused, not relayed twice.
  EXPECT_THAT(std::string(core_.TrainingRowReceived(1, TrainingRowAt(5, proto::TrainingRow::PROGRESS), now_).message()),
              HasSubstr("only rank 0 reports"));
  EXPECT_TRUE(core_.has_queued());
  const std::vector<proto::TrainingRow> rows = core_.TakeTrainingRows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].step(), 5u);
  EXPECT_EQ(rows[1].kind(), proto::TrainingRow::RUN);
  EXPECT_TRUE(core_.TakeRows().empty());  // no experiment rows
  ASSERT_TRUE(core_.FinishedReceived(1, now_).ok());
  ASSERT_TRUE(core_.FinishedReceived(2, now_).ok());
  EXPECT_EQ(core_.state(), State::kRunning);
  ASSERT_TRUE(core_.FinishedReceived(0, now_).ok());
  EXPECT_EQ(core_.state(), State::kDone);
  EXPECT_TRUE(core_.Release().ok());
}

TEST_F(TrainingCoreTest, ALostRankFailsTheRunNamed) {
  Run(Training(n_));
  Sent();
  core_.WorkerLost(2);
  EXPECT_EQ(FailureSentToAll(),
            "lost rank 2 (worker 2 (host-2 pid 102)): its control stream closed (process died "
            "or network failed)");
}

TEST_F(TrainingCoreTest, TheRunHasADeadlineFromItsStepsAndTimeout) {
  Run(Training(n_));  // 10 steps of at most 5 s: (10 + 1) x 5 s + 30 s
  Advance(seconds(84));
  EXPECT_EQ(core_.state(), State::kRunning);
  Advance(seconds(2));
  EXPECT_EQ(FailureSentToAll(), "timed out waiting for the training run");
}

TEST_F(TrainingCoreTest, ASpecWithSweepAxesOrAResultRowIsRefused) {
  Attach(n_);
  proto::TrainingSpec swept = Training(n_);
  swept.add_worker_counts(2);
  EXPECT_EQ(core_.SubmitTraining(swept, seconds(30), now_).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_.state(), State::kIdle);
  Run(Training(n_));
  EXPECT_FALSE(core_.ResultReceived(0, Result(0, 4096), now_).ok());
}

TEST_F(TrainingCoreTest, WorkersAndServersBeyondTheLimitsAreRefusedByName) {
  Attach(n_);
  proto::TrainingSpec spec = Training(n_);
  spec.set_sync("ps");
  spec.set_servers(kMaxServers + 1);  // --servers holds 1..kMaxServers; a spec must too
  absl::Status refused = core_.SubmitTraining(spec, seconds(30), now_).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(), "a training run's servers must be 1..64, not 65");
  spec = Training(kMaxWorkers + 1);
  refused = core_.SubmitTraining(spec, seconds(30), now_).status();
  EXPECT_EQ(refused.message(), "a training run's workers must be 1..1024, not 1025");
  EXPECT_EQ(core_.state(), State::kIdle);
}

TEST_F(TrainingCoreTest, PsTrainingWaitsForItsShardsAndHandsThemOut) {
  core_.SetOwnShardAddress("10.0.0.1:5000");
  proto::TrainingSpec spec = Training(2);
  spec.set_sync("ps");
  spec.set_servers(2);
  n_ = 2;
  Attach(2);
  ASSERT_TRUE(core_.SubmitTraining(spec, seconds(30), now_).ok());
  EXPECT_EQ(core_.WaitingFor(), "2 of 2 workers attached, 1 of 2 parameter-server shards");
  core_.ShardJoined("10.0.0.2:5000", now_);
  const std::vector<CoordinatorCore::Outgoing> out = core_.TakeMessages();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_THAT(out[0].message.prepare().shard_addresses(),
              ::testing::ElementsAre("10.0.0.1:5000", "10.0.0.2:5000"));
}

}  // namespace
}  // namespace testbed::core_testing
