// The worker's handlers of the coordinator's messages, alone: no coordinator,
// no gRPC; what they send back is recorded. Messages out of order are refused
// with an error naming the message and the worker's state; an Abort while idle
// only ends the worker. One case runs a whole one-rank experiment over UCX.
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "proto/spec.h"
#include "worker/control_handlers.h"
#include "worker/train/dataset.h"

namespace testbed {
namespace {

using After = ControlHandlers::After;

class RecordingLink final : public ControlLink {
 public:
  bool Send(const proto::WorkerMessage& message) override {
    std::lock_guard lock(mu_);
    sent_.push_back(message);
    return true;
  }
  void AwaitVerdict() override { ++verdicts_awaited; }

  std::vector<proto::WorkerMessage> sent() {
    std::lock_guard lock(mu_);
    return sent_;
  }
  int verdicts_awaited = 0;

 private:
  std::mutex mu_;
  std::vector<proto::WorkerMessage> sent_;
};

proto::CoordinatorMessage Welcome() {
  proto::CoordinatorMessage m;
  m.mutable_welcome()->set_worker_id(3);
  m.mutable_welcome()->set_heartbeat_ms(250);
  return m;
}
proto::CoordinatorMessage Prepare(std::uint64_t id) {
  proto::CoordinatorMessage m;
  m.mutable_prepare()->set_experiment_id(id);
  m.mutable_prepare()->set_rank(0);
  m.mutable_prepare()->set_world_size(1);
  proto::ExperimentSpec& spec = *m.mutable_prepare()->mutable_spec();
  spec.set_workers(1);
  spec.add_algorithms("ring");
  spec.add_sizes(4 * 16);
  spec.set_iterations(1);
  spec.set_warmup(0);
  ApplyDefaults(spec);
  return m;
}
proto::CoordinatorMessage Connect(std::uint64_t id, const std::string& address) {
  proto::CoordinatorMessage m;
  m.mutable_connect()->set_experiment_id(id);
  m.mutable_connect()->add_ucx_addresses(address);
  return m;
}
proto::CoordinatorMessage Start(std::uint64_t id) {
  proto::CoordinatorMessage m;
  m.mutable_start()->set_experiment_id(id);
  return m;
}
proto::CoordinatorMessage Abort(std::uint64_t id) {
  proto::CoordinatorMessage m;
  m.mutable_abort()->set_experiment_id(id);
  m.mutable_abort()->set_reason("lost rank 1");
  return m;
}

// A one-rank training run: Prepare carries a TrainingSpec instead of a spec.
proto::CoordinatorMessage PrepareTraining(std::uint64_t id, const std::string& sync) {
  proto::CoordinatorMessage m;
  m.mutable_prepare()->set_experiment_id(id);
  m.mutable_prepare()->set_rank(0);
  m.mutable_prepare()->set_world_size(1);
  proto::TrainingSpec& spec = *m.mutable_prepare()->mutable_training();
  spec.set_workers(1);
  spec.set_sync(sync);
  spec.add_hidden(8);
  spec.set_batch(8);
  spec.set_steps(3);
  spec.set_report_every_steps(1);
  spec.set_train_accuracy_samples(100);
  return m;
}

class ControlHandlersTest : public ::testing::Test {
 protected:
  // The one Failure sent, as "experiment_id: message".
  std::string OnlyFailure() {
    const auto sent = link_.sent();
    if (sent.size() != 1 || !sent[0].has_failure()) return "not one Failure";
    return std::to_string(sent[0].failure().experiment_id()) + ": " + sent[0].failure().message();
  }

  WorkerOptions options_;
  RecordingLink link_;
  ControlHandlers handlers_{options_, link_};
};

TEST_F(ControlHandlersTest, AWelcomeAttaches) {
  EXPECT_EQ(handlers_.Handle(Welcome()), After::kReadOn);
  EXPECT_EQ(handlers_.heartbeat_interval(), std::chrono::milliseconds(250));
  EXPECT_FALSE(handlers_.failed());
  EXPECT_TRUE(link_.sent().empty());
}

TEST_F(ControlHandlersTest, AnAbortWhileIdleEndsTheWorkerAndNothingElse) {
  handlers_.Handle(Welcome());
  EXPECT_EQ(handlers_.Handle(Abort(4)), After::kLeave);  // not kExitNow: no sweep to strand
  EXPECT_TRUE(handlers_.failed());
  EXPECT_TRUE(link_.sent().empty());  // the coordinator knows why; nothing to report
}

TEST_F(ControlHandlersTest, AMessageOfAnUnknownKindIsIgnored) {
  handlers_.Handle(Welcome());
  EXPECT_EQ(handlers_.Handle(proto::CoordinatorMessage()), After::kReadOn);
  EXPECT_FALSE(handlers_.failed());
  EXPECT_TRUE(link_.sent().empty());
}

TEST_F(ControlHandlersTest, ConnectBeforeAnyPrepareIsRefused) {
  handlers_.Handle(Welcome());
  EXPECT_EQ(handlers_.Handle(Connect(5, "x")), After::kLeave);
  EXPECT_TRUE(handlers_.failed());
  EXPECT_EQ(OnlyFailure(), "5: unexpected Connect from the coordinator while idle");
}

TEST_F(ControlHandlersTest, StartBeforeAnyPrepareIsRefused) {
  handlers_.Handle(Welcome());
  EXPECT_EQ(handlers_.Handle(Start(5)), After::kLeave);
  EXPECT_EQ(OnlyFailure(), "5: unexpected Start from the coordinator while idle");
}

TEST_F(ControlHandlersTest, PrepareBeforeTheWelcomeIsRefused) {
  EXPECT_EQ(handlers_.Handle(Prepare(1)), After::kLeave);
  EXPECT_EQ(OnlyFailure(),
            "1: unexpected Prepare from the coordinator while attaching (no Welcome yet)");
}

TEST_F(ControlHandlersTest, ASecondWelcomeIsRefused) {
  handlers_.Handle(Welcome());
  EXPECT_EQ(handlers_.Handle(Welcome()), After::kLeave);
  EXPECT_EQ(OnlyFailure(), "0: unexpected Welcome from the coordinator while idle");
}

// A whole experiment of one rank over a real UCX transport, then the next
// experiment's Prepare, then messages out of order for it.
TEST_F(ControlHandlersTest, RunsAnExperimentThenRefusesMessagesOutOfOrder) {
  handlers_.Handle(Welcome());
  ASSERT_EQ(handlers_.Handle(Prepare(7)), After::kReadOn) << OnlyFailure();
  auto sent = link_.sent();
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_TRUE(sent[0].has_address());
  EXPECT_EQ(sent[0].address().experiment_id(), 7u);
  const std::string address = sent[0].address().ucx_address();

  // Start before Connect, and Connect for another experiment, are refused
  // further down; here the right order.
  ASSERT_EQ(handlers_.Handle(Connect(7, address)), After::kReadOn);
  ASSERT_EQ(handlers_.Handle(Start(7)), After::kReadOn);
  handlers_.WaitForSweep();
  EXPECT_FALSE(handlers_.sweeping());
  sent = link_.sent();
  ASSERT_EQ(sent.size(), 4u);  // Address, Ready, one result (ring at 64 bytes), Finished
  EXPECT_EQ(sent[1].ready().experiment_id(), 7u);
  EXPECT_EQ(sent[2].result().algorithm(), "ring");
  EXPECT_EQ(sent[2].result().wrong(), 0);
  EXPECT_EQ(sent[3].finished().experiment_id(), 7u);
  EXPECT_FALSE(handlers_.failed());
  EXPECT_EQ(link_.verdicts_awaited, 0);

  // The next experiment replaces it; a Connect naming the old one is refused.
  ASSERT_EQ(handlers_.Handle(Prepare(8)), After::kReadOn);
  EXPECT_EQ(handlers_.Handle(Connect(7, address)), After::kLeave);
  sent = link_.sent();
  ASSERT_EQ(sent.size(), 6u);
  EXPECT_EQ(sent[5].failure().message(),
            "unexpected Connect from the coordinator while experiment 8 is prepared");
  EXPECT_EQ(handlers_.Handle(Start(8)), After::kLeave);
  EXPECT_EQ(link_.sent().back().failure().message(),
            "unexpected Start from the coordinator while experiment 8 is prepared");
}

TEST_F(ControlHandlersTest, ASecondStartIsRefused) {
  handlers_.Handle(Welcome());
  ASSERT_EQ(handlers_.Handle(Prepare(2)), After::kReadOn) << OnlyFailure();
  const std::string address = link_.sent()[0].address().ucx_address();
  ASSERT_EQ(handlers_.Handle(Connect(2, address)), After::kReadOn);
  ASSERT_EQ(handlers_.Handle(Start(2)), After::kReadOn);
  // Whether or not the first sweep still runs: before, a second Start
  // replaced a joinable std::thread, which ends the process.
  EXPECT_EQ(handlers_.Handle(Start(2)), After::kLeave);
  EXPECT_TRUE(handlers_.failed());
  handlers_.WaitForSweep();
  std::vector<std::string> failures;
  for (const proto::WorkerMessage& m : link_.sent()) {
    if (m.has_failure()) failures.push_back(m.failure().message());
  }
  EXPECT_EQ(failures, std::vector<std::string>{
                          "unexpected Start from the coordinator while experiment 2 has started"});
}

// After Start the rank trains instead of sweeping; rank 0 sends its rows,
// then Finished.
TEST_F(ControlHandlersTest, TrainsARankAndSendsItsRows) {
  if (!FashionMnistInstalled()) GTEST_SKIP() << "needs Debian's dataset-fashion-mnist";
  handlers_.Handle(Welcome());
  ASSERT_EQ(handlers_.Handle(PrepareTraining(4, "ring")), After::kReadOn) << OnlyFailure();
  const std::string address = link_.sent()[0].address().ucx_address();
  ASSERT_EQ(handlers_.Handle(Connect(4, address)), After::kReadOn);
  ASSERT_EQ(handlers_.Handle(Start(4)), After::kReadOn);
  handlers_.WaitForSweep();
  const auto sent = link_.sent();
  ASSERT_EQ(sent.size(), 7u);  // Address, Ready, three progress rows and the run's, Finished
  for (int i = 2; i < 6; ++i) {
    ASSERT_TRUE(sent[i].has_training_row()) << i;
    EXPECT_EQ(sent[i].training_row().deployment(), "run");  // no placement in the spec
    EXPECT_EQ(sent[i].training_row().step(), static_cast<std::uint64_t>(i < 5 ? i - 1 : 3));
  }
  EXPECT_EQ(sent[5].training_row().kind(), proto::TrainingRow::RUN);
  EXPECT_EQ(sent[6].finished().experiment_id(), 4u);
  EXPECT_FALSE(handlers_.failed());
}

// The worker checks the names of the spec it is handed, and reports a bad
// one as its failure (the coordinator does not know the registry).
TEST_F(ControlHandlersTest, ATrainingSpecWithAnUnknownSyncFailsNamingIt) {
  handlers_.Handle(Welcome());
  ASSERT_EQ(handlers_.Handle(PrepareTraining(5, "quicksort")), After::kReadOn) << OnlyFailure();
  const std::string address = link_.sent()[0].address().ucx_address();
  ASSERT_EQ(handlers_.Handle(Connect(5, address)), After::kReadOn);
  ASSERT_EQ(handlers_.Handle(Start(5)), After::kReadOn);
  handlers_.WaitForSweep();
  EXPECT_TRUE(handlers_.failed());
  EXPECT_EQ(link_.verdicts_awaited, 1);
  ASSERT_TRUE(link_.sent().back().has_failure());
  EXPECT_NE(link_.sent().back().failure().message().find("unknown --sync 'quicksort'"),
            std::string::npos)
      << link_.sent().back().failure().message();
}

// A transport the worker cannot make (direct for fake-device memory is refused
// on every UCX) fails the Prepare. The reader must then read on for the
// coordinator's Abort: leaving at once could end the process before the
// report left it, and the coordinator would name this rank lost instead.
TEST_F(ControlHandlersTest, APrepareWhoseTransportIsRefusedReportsItAndAwaitsTheVerdict) {
  handlers_.Handle(Welcome());
  proto::CoordinatorMessage prepare = Prepare(6);
  prepare.mutable_prepare()->mutable_spec()->set_memory(proto::Memory::fake_device);
  prepare.mutable_prepare()->mutable_spec()->set_gpu_path(proto::GpuPath::direct);
  EXPECT_EQ(handlers_.Handle(prepare), After::kAwaitVerdict);
  EXPECT_TRUE(handlers_.failed());
  EXPECT_NE(OnlyFailure().find("6: gpu_path direct refused: "), std::string::npos)
      << OnlyFailure();
  EXPECT_EQ(handlers_.Handle(Abort(6)), After::kLeave);
}

}  // namespace
}  // namespace testbed
