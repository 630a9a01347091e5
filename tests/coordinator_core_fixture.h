// The coordinator's state machine under test (tests/coordinator_core_test.cc
// for experiments, tests/coordinator_training_test.cc for training runs):
// workers that attach, a clock the tests move by hand, and the messages the
// core queued, read back by kind.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "server/coordinator_core.h"

namespace testbed::core_testing {

using ::testing::HasSubstr;
using std::chrono::milliseconds;
using std::chrono::seconds;
using State = ExperimentState;
using Time = CoordinatorCore::Time;

inline proto::ExperimentSpec Spec(int workers, std::vector<std::int64_t> sizes = {4096}) {
  proto::ExperimentSpec spec;
  spec.set_workers(workers);
  spec.add_algorithms("ring");
  for (std::int64_t bytes : sizes) spec.add_sizes(bytes);
  spec.set_iterations(2);
  return spec;
}

inline proto::RankResult Result(int rank, std::int64_t bytes, int iterations = 2) {
  proto::RankResult result;
  result.set_rank(rank);
  result.set_algorithm("ring");
  result.set_bytes(bytes);
  for (int i = 0; i < iterations; ++i) result.add_iteration_us(10 + rank);
  result.set_payload_bytes_sent(bytes);
  return result;
}

class CoreTest : public ::testing::Test {
 protected:
  // Workers 0..n-1 attach; with ids in attach order they become ranks 0..n-1.
  void Attach(int n) {
    for (int i = 0; i < n; ++i) {
      const absl::StatusOr<std::uint32_t> id = core_.ReserveWorkerId();
      ASSERT_TRUE(id.ok()) << id.status();
      core_.WorkerAttached(*id, "host-" + std::to_string(*id), 100 + *id, now_);
    }
  }
  void Submit(const proto::ExperimentSpec& spec) {
    const absl::StatusOr<std::uint64_t> id = core_.Submit(spec, seconds(30), now_);
    ASSERT_TRUE(id.ok()) << id.status();
  }
  // Moves time on; every rank but `silent` heartbeats; deadlines are checked.
  void Advance(Time::duration d, int silent = -1) {
    now_ += d;
    for (int r = 0; r < n_; ++r) {
      if (r != silent) core_.Heartbeat(r, now_);
    }
    core_.CheckDeadlines(now_);
  }
  void AllAddresses() {
    for (int r = 0; r < n_; ++r) {
      ASSERT_TRUE(core_.AddressReceived(r, "ucx-" + std::to_string(r), now_).ok());
    }
  }
  void AllReady() {
    for (int r = 0; r < n_; ++r) ASSERT_TRUE(core_.ReadyReceived(r, now_).ok());
  }
  void AllResults(std::int64_t bytes) {
    for (int r = 0; r < n_; ++r) ASSERT_TRUE(core_.ResultReceived(r, Result(r, bytes), now_).ok());
  }
  void AllFinished() {
    for (int r = 0; r < n_; ++r) ASSERT_TRUE(core_.FinishedReceived(r, now_).ok());
  }
  // An experiment of n_ workers, one 4 KiB row, brought to `state`.
  void BringTo(State state) {
    Attach(n_);
    Submit(Spec(n_));
    if (state == State::kPreparing) return;
    AllAddresses();
    if (state == State::kConnecting) return;
    AllReady();
    if (state == State::kRunning) return;
    AllResults(4096);
    if (state == State::kCollecting) return;
    AllFinished();
  }
  // The kinds of the queued messages, per worker in order, as "w:kind".
  std::vector<std::string> Sent() {
    std::vector<std::string> sent;
    for (const CoordinatorCore::Outgoing& out : core_.TakeMessages()) {
      const auto* field =
          out.message.GetDescriptor()->FindFieldByNumber(out.message.kind_case());
      sent.push_back(std::to_string(out.worker_id) + ":" + (field ? field->name() : "?"));
    }
    return sent;
  }
  // The failure, and an Abort with its text queued for every rank.
  std::string FailureSentToAll() {
    EXPECT_EQ(core_.state(), State::kFailed);
    std::vector<CoordinatorCore::Outgoing> out = core_.TakeMessages();
    std::vector<bool> aborted(n_, false);
    for (const auto& m : out) {
      if (m.message.has_abort()) {
        EXPECT_EQ(m.message.abort().reason(), core_.failure().message());
        aborted[m.worker_id] = true;
      }
    }
    for (int r = 0; r < n_; ++r) EXPECT_TRUE(aborted[r]) << "no Abort for rank " << r;
    return std::string(core_.failure().message());
  }

  int n_ = 3;
  Time now_ = Time{} + std::chrono::hours(1);
  CoordinatorCore core_;
};


}  // namespace testbed::core_testing
