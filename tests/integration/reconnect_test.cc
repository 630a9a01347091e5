// Deployed daemons, as compose or Kubernetes runs them: a coordinator and two
// workers started on their own, experiments submitted with `testbed run`.
// When the coordinator is killed and started again on the same address, the
// workers attach again (with backoff) and the next experiment runs on them;
// with --reconnect 0 a worker exits with status 3 instead.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "tests/process_runner.h"

namespace testbed {
namespace {

using testing::TempDir;
using testing::TestbedProcess;

class ReconnectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("TESTBED_JOB_ID", "reconnect", 1);
    setenv("TESTBED_TOKEN", "secret", 1);
    dir_ = TempDir("reconnect");
    coordinator_ = "127.0.0.1:" + std::to_string(testing::FreePort());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A process whose output goes to its own folder; ended (SIGTERM, then
  // SIGKILL) by its destructor, also when the test fails.
  std::unique_ptr<TestbedProcess> Start(const std::string& name, const std::string& binary,
                                        const std::vector<std::string>& args) {
    const std::string out = dir_ + "/" + name;
    std::filesystem::create_directories(out);
    return std::make_unique<TestbedProcess>(binary, args, out);
  }
  std::unique_ptr<TestbedProcess> StartServer(const std::string& name) {
    return Start(name, TESTBED_SERVER_PATH, {"--listen", coordinator_});
  }
  std::unique_ptr<TestbedProcess> StartWorker(const std::string& name, const std::string& reconnect) {
    return Start(name, TESTBED_WORKER_PATH,
                 {"--coordinator", coordinator_, "--reconnect", reconnect});
  }
  // `testbed run` of one small ring; its exit status.
  std::optional<int> Submit(const std::string& name) {
    auto run = Start(name, TESTBED_CLI_PATH,
                     {"run", "--coordinator", coordinator_, "--workers", "2", "--algorithms",
                      "ring", "--sizes", "4KiB", "--iters", "1", "--warmup", "0",
                      "--wait-for-workers", "30"});
    const auto status = run->Wait(std::chrono::seconds(60));
    if (status != 0) ADD_FAILURE() << name << ":\n" << run->Stderr();
    return status;
  }

  std::string dir_;
  std::string coordinator_;
};

TEST_F(ReconnectTest, WorkersRejoinARestartedCoordinator) {
  auto server = StartServer("server-1");
  auto worker0 = StartWorker("worker-0", "60");
  auto worker1 = StartWorker("worker-1", "60");
  ASSERT_EQ(Submit("run-1"), 0);

  ASSERT_EQ(kill(server->pid(), SIGKILL), 0);
  ASSERT_TRUE(server->Wait(std::chrono::seconds(10)).has_value());
  for (auto* worker : {worker0.get(), worker1.get()}) {
    // spdlog writes the daemons' logs to stdout.
    const std::string log =
        worker->WaitForStdout("attaching to the coordinator again", std::chrono::seconds(20));
    EXPECT_NE(log.find("lost the coordinator"), std::string::npos) << log;
    EXPECT_NE(log.find("attaching to the coordinator again"), std::string::npos) << log;
    EXPECT_FALSE(worker->Wait(std::chrono::milliseconds(0)).has_value()) << "a worker exited";
  }

  auto restarted = StartServer("server-2");
  EXPECT_EQ(Submit("run-2"), 0);
  EXPECT_FALSE(worker0->Wait(std::chrono::milliseconds(0)).has_value());
  EXPECT_FALSE(worker1->Wait(std::chrono::milliseconds(0)).has_value());
}

TEST_F(ReconnectTest, WithoutReconnectAWorkerExitsWithStatusThree) {
  auto server = StartServer("server");
  auto worker = StartWorker("worker", "0");
  worker->WaitForStdout("attached as worker", std::chrono::seconds(20));
  ASSERT_EQ(kill(server->pid(), SIGKILL), 0);
  const auto status = worker->Wait(std::chrono::seconds(20));
  ASSERT_TRUE(status.has_value()) << worker->Stdout();
  EXPECT_EQ(*status, 3) << worker->Stdout();
}

}  // namespace
}  // namespace testbed
