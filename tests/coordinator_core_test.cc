// The coordinator's state machine without gRPC and without a clock: every
// transition, a worker lost in each state, each deadline, and the events a
// state refuses. Time is a value the tests move by hand; training runs are in
// tests/coordinator_training_test.cc.
#include "server/coordinator_core.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/coordinator_core_fixture.h"

namespace testbed::core_testing {
namespace {

// --- The path through every state -----------------------------------------

TEST_F(CoreTest, SubmitWithoutWorkersWaitsForThem) {
  EXPECT_EQ(core_.state(), State::kIdle);
  Attach(1);
  Submit(Spec(3));
  EXPECT_EQ(core_.state(), State::kWaitingForWorkers);
  EXPECT_EQ(core_.experiment_id(), 1u);
  EXPECT_FALSE(core_.experiment_running());
  EXPECT_EQ(core_.WaitingFor(), "1 of 3 workers attached");
  EXPECT_TRUE(Sent().empty());
}

TEST_F(CoreTest, TheLastWorkerToAttachStartsThePreparation) {
  Submit(Spec(3));
  Attach(2);
  EXPECT_EQ(core_.state(), State::kWaitingForWorkers);
  Attach(1);
  EXPECT_EQ(core_.state(), State::kPreparing);
  EXPECT_TRUE(core_.experiment_running());
  const std::vector<CoordinatorCore::Outgoing> out = core_.TakeMessages();
  ASSERT_EQ(out.size(), 3u);
  for (std::uint32_t r = 0; r < 3; ++r) {
    EXPECT_EQ(out[r].worker_id, r);
    ASSERT_TRUE(out[r].message.has_prepare());
    EXPECT_EQ(out[r].message.prepare().rank(), r);
    EXPECT_EQ(out[r].message.prepare().world_size(), 3u);
    EXPECT_EQ(out[r].message.prepare().experiment_id(), 1u);
    EXPECT_EQ(out[r].message.prepare().spec().iterations(), 2u);
    EXPECT_EQ(out[r].message.prepare().spec().timeout_s(), 60u);  // defaults applied
  }
}

TEST_F(CoreTest, SubmitWithEnoughWorkersPreparesAtOnceAndLeavesTheRestIdle) {
  Attach(4);
  Submit(Spec(3));
  EXPECT_EQ(core_.state(), State::kPreparing);
  EXPECT_EQ(Sent(), (std::vector<std::string>{"0:prepare", "1:prepare", "2:prepare"}));
  EXPECT_EQ(core_.RankOf(2), 2);
  EXPECT_EQ(core_.RankOf(3), std::nullopt);
}

TEST_F(CoreTest, EveryAddressMovesPreparingToConnecting) {
  BringTo(State::kPreparing);
  Sent();
  ASSERT_TRUE(core_.AddressReceived(2, "ucx-2", now_).ok());
  ASSERT_TRUE(core_.AddressReceived(0, "ucx-0", now_).ok());
  ASSERT_TRUE(core_.AddressReceived(0, "ucx-0b", now_).ok());  // a repeat replaces
  EXPECT_EQ(core_.state(), State::kPreparing);
  ASSERT_TRUE(core_.AddressReceived(1, "ucx-1", now_).ok());
  EXPECT_EQ(core_.state(), State::kConnecting);
  const std::vector<CoordinatorCore::Outgoing> out = core_.TakeMessages();
  ASSERT_EQ(out.size(), 3u);
  for (const auto& m : out) {
    ASSERT_TRUE(m.message.has_connect());
    EXPECT_THAT(m.message.connect().ucx_addresses(),
                ::testing::ElementsAre("ucx-0b", "ucx-1", "ucx-2"));
  }
}

TEST_F(CoreTest, EveryReadyMovesConnectingToRunning) {
  BringTo(State::kConnecting);
  Sent();
  ASSERT_TRUE(core_.ReadyReceived(0, now_).ok());
  ASSERT_TRUE(core_.ReadyReceived(1, now_).ok());
  EXPECT_EQ(core_.state(), State::kConnecting);
  ASSERT_TRUE(core_.ReadyReceived(2, now_).ok());
  EXPECT_EQ(core_.state(), State::kRunning);
  const std::vector<std::string> sent = Sent();
  ASSERT_GE(sent.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(sent.end() - 3, sent.end()),
            (std::vector<std::string>{"0:start", "1:start", "2:start"}));
}

TEST_F(CoreTest, RowsComeInSpecOrderThenCollecting) {
  Attach(n_);
  Submit(Spec(n_, {4096, 8}));
  AllAddresses();
  AllReady();
  // Rank 0 runs ahead: its second row arrives before the first is complete.
  ASSERT_TRUE(core_.ResultReceived(0, Result(0, 4096), now_).ok());
  ASSERT_TRUE(core_.ResultReceived(0, Result(0, 8), now_).ok());
  ASSERT_TRUE(core_.ResultReceived(2, Result(2, 4096), now_).ok());
  EXPECT_TRUE(core_.TakeRows().empty());
  ASSERT_TRUE(core_.ResultReceived(1, Result(1, 4096), now_).ok());
  std::vector<CoordinatorCore::Row> rows = core_.TakeRows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].row.bytes(), 4096);
  EXPECT_EQ(rows[0].row.workers(), 3u);
  EXPECT_DOUBLE_EQ(rows[0].row.time_us_avg(), 12);  // the slowest rank's
  EXPECT_EQ(rows[0].note, "[1/2] ring at 4KiB: 12 us, wrong 0");
  EXPECT_EQ(core_.state(), State::kRunning);
  ASSERT_TRUE(core_.ResultReceived(2, Result(2, 8), now_).ok());
  ASSERT_TRUE(core_.ResultReceived(1, Result(1, 8), now_).ok());
  rows = core_.TakeRows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].note, "[2/2] ring at 8B: 12 us, wrong 0");
  EXPECT_EQ(core_.state(), State::kCollecting);
}

TEST_F(CoreTest, EveryFinishedMovesCollectingToDoneAndReleaseIdlesTheWorkers) {
  BringTo(State::kRunning);
  // A rank may finish before the others' last results are in.
  ASSERT_TRUE(core_.ResultReceived(0, Result(0, 4096), now_).ok());
  ASSERT_TRUE(core_.FinishedReceived(0, now_).ok());
  ASSERT_TRUE(core_.ResultReceived(1, Result(1, 4096), now_).ok());
  ASSERT_TRUE(core_.ResultReceived(2, Result(2, 4096), now_).ok());
  EXPECT_EQ(core_.state(), State::kCollecting);
  ASSERT_TRUE(core_.FinishedReceived(1, now_).ok());
  EXPECT_EQ(core_.state(), State::kCollecting);
  ASSERT_TRUE(core_.FinishedReceived(2, now_).ok());
  EXPECT_EQ(core_.state(), State::kDone);
  EXPECT_TRUE(core_.Release().ok());
  EXPECT_EQ(core_.state(), State::kIdle);
  EXPECT_EQ(core_.RankOf(0), std::nullopt);
  // The same workers take the next experiment at once.
  Sent();
  Submit(Spec(n_));
  EXPECT_EQ(core_.experiment_id(), 2u);
  EXPECT_EQ(core_.state(), State::kPreparing);
}

TEST_F(CoreTest, AParameterServerExperimentWaitsForItsShards) {
  proto::ExperimentSpec spec = Spec(2);
  spec.set_algorithms(0, "ps");
  spec.set_servers(2);
  Attach(2);
  EXPECT_EQ(core_.Submit(spec, seconds(30), now_).status().code(),
            absl::StatusCode::kFailedPrecondition);  // no address of its own yet
  core_.SetOwnShardAddress("10.0.0.1:5000");
  Submit(spec);
  EXPECT_EQ(core_.state(), State::kWaitingForWorkers);
  EXPECT_EQ(core_.WaitingFor(), "2 of 2 workers attached, 1 of 2 parameter-server shards");
  EXPECT_EQ(core_.ShardJoined("10.0.0.2:5000", now_), 1u);
  EXPECT_EQ(core_.ShardJoined("10.0.0.2:5000", now_), 1u);  // the same shard again
  EXPECT_EQ(core_.state(), State::kPreparing);
  const std::vector<CoordinatorCore::Outgoing> out = core_.TakeMessages();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_THAT(out[1].message.prepare().shard_addresses(),
              ::testing::ElementsAre("10.0.0.1:5000", "10.0.0.2:5000"));
}

// --- A worker lost in each state ------------------------------------------

TEST_F(CoreTest, AWorkerLostWhileWaitingForWorkersOnlyStopsCounting) {
  // No rank is given before N workers are there: nothing to name, nothing failed.
  Attach(2);
  Submit(Spec(3));
  core_.WorkerLost(1);
  EXPECT_EQ(core_.state(), State::kWaitingForWorkers);
  EXPECT_EQ(core_.WaitingFor(), "1 of 3 workers attached");
  Attach(1);
  EXPECT_EQ(core_.state(), State::kWaitingForWorkers);
  Attach(1);
  EXPECT_EQ(core_.state(), State::kPreparing);
  // The newcomers take the lost worker's number, then the next.
  EXPECT_EQ(Sent(), (std::vector<std::string>{"0:prepare", "1:prepare", "2:prepare"}));
}

class LostInState : public CoreTest, public ::testing::WithParamInterface<State> {};

TEST_P(LostInState, FailsTheExperimentNamingTheRank) {
  BringTo(GetParam());
  ASSERT_EQ(core_.state(), GetParam());
  Sent();
  core_.WorkerLost(1);
  EXPECT_EQ(core_.failure().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(FailureSentToAll(),
            "lost rank 1 (worker 1 (host-1 pid 101)): its control stream closed (process died "
            "or network failed)");
  // Later news changes nothing: the first failure stands.
  core_.WorkerLost(2);
  Advance(seconds(60));
  EXPECT_THAT(std::string(core_.failure().message()), HasSubstr("lost rank 1 "));
  EXPECT_TRUE(core_.TakeMessages().empty());
  EXPECT_EQ(core_.Release().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(core_.state(), State::kIdle);
}

INSTANTIATE_TEST_SUITE_P(EveryState, LostInState,
                         ::testing::Values(State::kPreparing, State::kConnecting, State::kRunning,
                                           State::kCollecting),
                         [](const auto& info) { return std::string(StateName(info.param)); });

TEST_F(CoreTest, AWorkerLostWhenDoneChangesNothing) {
  BringTo(State::kDone);
  core_.WorkerLost(1);
  EXPECT_EQ(core_.state(), State::kDone);
  EXPECT_TRUE(core_.Release().ok());
}

TEST_F(CoreTest, AnIdleWorkerLostDuringAnExperimentChangesNothing) {
  n_ = 2;
  Attach(3);
  Submit(Spec(2));  // workers 0 and 1; worker 2 stays idle
  core_.WorkerLost(2);
  EXPECT_EQ(core_.state(), State::kPreparing);
  core_.WorkerLost(1);
  EXPECT_EQ(core_.state(), State::kFailed);
  EXPECT_THAT(std::string(core_.failure().message()), HasSubstr("lost rank 1 (worker 1 "));
}

// --- Worker numbers ---------------------------------------------------------

// A harness asks for its own index, so "worker 2" in an error is its
// "testbed-worker 2"; a number already taken falls back to the lowest free
// one, and a lost worker's number is free again (a reconnecting worker gets it).
TEST_F(CoreTest, AWorkerGetsTheNumberItAsksForWhenFree) {
  EXPECT_EQ(*core_.ReserveWorkerId(2), 2u);
  EXPECT_EQ(*core_.ReserveWorkerId(0), 0u);
  EXPECT_EQ(*core_.ReserveWorkerId(2), 1u);  // taken: the lowest free
  EXPECT_EQ(*core_.ReserveWorkerId(), 3u);
  core_.WorkerAttached(2, "host-2", 102, now_);
  core_.WorkerLost(2);
  EXPECT_EQ(*core_.ReserveWorkerId(2), 2u);
  core_.WorkerLost(1);  // lost before it attached (its Welcome failed)
  EXPECT_EQ(*core_.ReserveWorkerId(), 1u);
  EXPECT_EQ(*core_.ReserveWorkerId(), 4u);
}

// Ranks follow worker numbers, whatever order the workers attached in.
TEST_F(CoreTest, RanksFollowTheWorkersNumbersNotTheirAttachOrder) {
  for (const std::uint32_t wanted : {2u, 0u, 1u}) {
    const absl::StatusOr<std::uint32_t> id = core_.ReserveWorkerId(wanted);
    ASSERT_TRUE(id.ok());
    core_.WorkerAttached(*id, "host-" + std::to_string(*id), 100 + *id, now_);
  }
  Submit(Spec(3));
  for (std::uint32_t worker = 0; worker < 3; ++worker) {
    EXPECT_EQ(core_.RankOf(worker), std::optional<int>(static_cast<int>(worker)));
  }
}

// --- Failure reports and heartbeats ---------------------------------------

TEST_F(CoreTest, AFailureReportIsHeldBackThenNamesEverySilentRank) {
  n_ = 4;
  BringTo(State::kRunning);
  Sent();
  Advance(seconds(1));
  const auto beat = [&](Time::duration d, std::vector<int> ranks) {
    now_ += d;
    for (int r : ranks) core_.Heartbeat(r, now_);
    core_.CheckDeadlines(now_);
  };
  beat(milliseconds(1000), {0, 1, 2});
  beat(milliseconds(1000), {0, 1});
  beat(milliseconds(500), {0, 1});
  // Rank 3 hangs; rank 0 times out on rank 1, which waits on rank 3.
  ASSERT_TRUE(core_.FailureReported(0, "lost connection to rank 1", now_).ok());
  beat(milliseconds(500), {0, 1});
  EXPECT_EQ(core_.state(), State::kRunning);  // 0.5 s: still held back
  beat(milliseconds(1), {0, 1});
  // Rank 3 has been silent for 3.001 s, three heartbeats; rank 2 for 2.001 s only.
  EXPECT_EQ(core_.failure().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(FailureSentToAll(),
            "rank 0 (worker 0 (host-0 pid 100)) reported: lost connection to rank 1; "
            "rank 3 (worker 3 (host-3 pid 103)) has sent no heartbeat for 3 s (hung?)");
}

TEST_F(CoreTest, ARankLostDuringTheHoldBackIsNamedFirstWithTheReport) {
  BringTo(State::kRunning);
  ASSERT_TRUE(core_.FailureReported(0, "lost connection to rank 2", now_).ok());
  core_.WorkerLost(0);  // it said why it stops: not the lost one
  EXPECT_EQ(core_.state(), State::kRunning);
  Advance(milliseconds(400));
  core_.WorkerLost(2);
  EXPECT_EQ(std::string(core_.failure().message()),
            "lost rank 2 (worker 2 (host-2 pid 102)): its control stream closed (process died "
            "or network failed); rank 0 (worker 0 (host-0 pid 100)) reported: lost connection "
            "to rank 2");
}

TEST_F(CoreTest, ARankSilentPastTheHeartbeatTimeoutIsLost) {
  BringTo(State::kRunning);
  for (int i = 0; i < 10; ++i) Advance(seconds(1), 1);
  EXPECT_EQ(core_.state(), State::kRunning);  // 10 s: not past it yet
  Advance(milliseconds(1), 1);
  EXPECT_EQ(FailureSentToAll(),
            "lost rank 1 (worker 1 (host-1 pid 101)): no heartbeat for 10 s (process hung or "
            "network failed)");
}

TEST_F(CoreTest, AnyMessageCountsAsAHeartbeat) {
  BringTo(State::kConnecting);
  now_ += seconds(9);
  proto::WorkerMessage ready;
  ready.mutable_ready();
  for (int r = 0; r < n_; ++r) ASSERT_TRUE(core_.Deliver(r, ready, now_).ok());
  now_ += seconds(9);
  core_.CheckDeadlines(now_);
  EXPECT_EQ(core_.state(), State::kRunning);
}

// --- Deadlines --------------------------------------------------------------

TEST_F(CoreTest, TheWaitForWorkersEndsUnavailable) {
  Attach(1);
  Submit(Spec(2));
  now_ += seconds(29);
  core_.CheckDeadlines(now_);
  EXPECT_EQ(core_.state(), State::kWaitingForWorkers);
  now_ += seconds(1);
  core_.CheckDeadlines(now_);
  EXPECT_EQ(core_.state(), State::kFailed);
  EXPECT_EQ(core_.failure(), absl::UnavailableError("only 1 of 2 workers attached after 30 s"));
  EXPECT_TRUE(core_.TakeMessages().empty());  // nobody had a rank to abort
  EXPECT_EQ(core_.Release().code(), absl::StatusCode::kUnavailable);
}

class HandshakeTimeout : public CoreTest,
                         public ::testing::WithParamInterface<std::pair<State, const char*>> {};

TEST_P(HandshakeTimeout, NamesWhatItWaitedFor) {
  BringTo(GetParam().first);
  Sent();
  for (int i = 0; i < 29; ++i) Advance(seconds(1));
  EXPECT_EQ(core_.state(), GetParam().first);
  Advance(seconds(1));
  EXPECT_EQ(FailureSentToAll(), std::string("timed out waiting for ") + GetParam().second);
}

INSTANTIATE_TEST_SUITE_P(
    EveryHandshake, HandshakeTimeout,
    ::testing::Values(std::pair{State::kPreparing, "UCX addresses"},
                      std::pair{State::kConnecting, "UCX connections"},
                      std::pair{State::kCollecting, "workers to finish"}),
    [](const auto& info) { return std::string(StateName(info.param.first)); });

TEST_F(CoreTest, EachRowHasItsOwnDeadlineFromWhenItsWaitBegan) {
  proto::ExperimentSpec spec = Spec(n_, {4096, 8});
  spec.set_timeout_s(1);  // a row may take (2 iterations + 1) x 1 s + 30 s = 33 s
  Attach(n_);
  Submit(spec);
  AllAddresses();
  AllReady();
  for (int i = 0; i < 20; ++i) Advance(seconds(1));
  AllResults(4096);  // row 2's wait begins here
  for (int i = 0; i < 32; ++i) Advance(seconds(1));
  EXPECT_EQ(core_.state(), State::kRunning);
  Advance(seconds(1));
  EXPECT_EQ(FailureSentToAll(), "timed out waiting for ring at 8B");
}

// --- Refusals ---------------------------------------------------------------

TEST_F(CoreTest, OneExperimentAtATime) {
  Submit(Spec(2));
  absl::StatusOr<std::uint64_t> second = core_.Submit(Spec(2), seconds(1), now_);
  EXPECT_EQ(second.status(),
            absl::FailedPreconditionError(
                "experiment 1 is waiting for workers; submit again when it has finished"));
  Attach(2);
  second = core_.Submit(Spec(2), seconds(1), now_);
  EXPECT_EQ(second.status(), absl::FailedPreconditionError("experiment 1 is still running"));
  core_.WorkerLost(0);
  second = core_.Submit(Spec(2), seconds(1), now_);  // failed, not yet released
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(core_.Release().ok());
  EXPECT_TRUE(core_.Submit(Spec(2), seconds(1), now_).ok());
  EXPECT_EQ(core_.experiment_id(), 2u);
}

TEST_F(CoreTest, ABadSpecIsRefusedNamingTheField) {
  proto::ExperimentSpec spec = Spec(2);
  spec.set_algorithms(0, "bubble");
  const absl::Status st = core_.Submit(spec, seconds(1), now_).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("unknown algorithm 'bubble'"));
  EXPECT_EQ(core_.state(), State::kIdle);
}

TEST_F(CoreTest, EventsOutOfPlaceAreRefusedAndChangeNothing) {
  Attach(1);  // worker 0: attached, never a rank
  n_ = 2;
  const auto refused = [&](const absl::Status& st, const char* says) {
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr(says));
  };
  refused(core_.AddressReceived(0, "ucx", now_), "worker 0 sent its UCX address for no running");
  core_.Heartbeat(0, now_);  // always welcome
  EXPECT_FALSE(core_.Release().ok());
  Submit(Spec(1));  // worker 0 is rank 0
  ASSERT_EQ(core_.state(), State::kPreparing);
  refused(core_.ReadyReceived(0, now_), "rank 0 (worker 0 (host-0 pid 100)) sent Ready while "
                                        "experiment 1 is preparing");
  refused(core_.ResultReceived(0, Result(0, 4096), now_), "sent a result while");
  refused(core_.FinishedReceived(0, now_), "sent Finished while experiment 1 is preparing");
  refused(core_.ReadyReceived(7, now_), "worker 7 sent Ready for no running experiment");
  EXPECT_FALSE(core_.Release().ok());
  EXPECT_EQ(core_.state(), State::kPreparing);
  ASSERT_TRUE(core_.AddressReceived(0, "ucx-0", now_).ok());
  refused(core_.AddressReceived(0, "ucx-0", now_), "while experiment 1 is connecting");
  ASSERT_TRUE(core_.ReadyReceived(0, now_).ok());
  refused(core_.ReadyReceived(0, now_), "while experiment 1 is running");
  ASSERT_TRUE(core_.ResultReceived(0, Result(0, 4096), now_).ok());
  EXPECT_EQ(core_.state(), State::kCollecting);
  refused(core_.ResultReceived(0, Result(0, 4096), now_), "while experiment 1 is collecting");
  ASSERT_TRUE(core_.FinishedReceived(0, now_).ok());
  EXPECT_EQ(core_.state(), State::kDone);
  refused(core_.FailureReported(0, "late", now_), "while experiment 1 is done");
  EXPECT_EQ(core_.state(), State::kDone);
  EXPECT_TRUE(core_.Release().ok());
}

TEST_F(CoreTest, AnEmptyAddressIsRefused) {
  BringTo(State::kPreparing);
  EXPECT_EQ(core_.AddressReceived(0, "", now_).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_.state(), State::kPreparing);
}

TEST_F(CoreTest, MismatchedResultsFailTheRowAsInternal) {
  BringTo(State::kRunning);
  Sent();
  ASSERT_TRUE(core_.ResultReceived(0, Result(0, 4096, 2), now_).ok());
  ASSERT_TRUE(core_.ResultReceived(1, Result(1, 4096, 3), now_).ok());
  ASSERT_TRUE(core_.ResultReceived(2, Result(2, 4096, 2), now_).ok());
  EXPECT_EQ(core_.failure().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(FailureSentToAll(), HasSubstr("rank 1 reported ring/4096 bytes/3 iterations"));
  EXPECT_TRUE(core_.TakeRows().empty());
}

// --- The client and the coordinator going away ------------------------------

TEST_F(CoreTest, AClientGoneWhileWaitingCancelsTheWait) {
  Submit(Spec(2));
  core_.ClientGone();
  EXPECT_EQ(core_.failure(), absl::CancelledError("cancelled while waiting for workers"));
}

TEST_F(CoreTest, AClientGoneWhileRunningAbortsEveryRank) {
  BringTo(State::kRunning);
  Sent();
  core_.ClientGone();
  EXPECT_EQ(core_.failure().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(FailureSentToAll(), "the client that submitted the experiment went away");
}

TEST_F(CoreTest, ShutdownFailsTheExperimentAndRefusesNewcomers) {
  BringTo(State::kConnecting);
  Sent();
  core_.Shutdown();
  EXPECT_EQ(core_.failure().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(FailureSentToAll(), "the coordinator is shutting down");
  EXPECT_EQ(core_.ReserveWorkerId().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(core_.Release().ok());
  EXPECT_EQ(core_.Submit(Spec(1), seconds(1), now_).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(CoreTest, ShutdownWhileWaitingCancelsTheWait) {
  Submit(Spec(2));
  core_.Shutdown();
  EXPECT_EQ(core_.failure(), absl::CancelledError("cancelled while waiting for workers"));
}

}  // namespace
}  // namespace testbed::core_testing
