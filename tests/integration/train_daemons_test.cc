// `testbed train` on testbed-worker daemons, through the coordinator: the
// same rows as the thread deployment for the same seed (the ranks run the
// same TrainRank over the same UCX schedules or parameter server), on daemons
// started by the command (--network loopback), on daemons already deployed
// (--deployment run against a LocalCluster started here), a killed worker
// named by its rank, and - as root - the emulated cluster.
//
// Tolerance: none beyond 1e-6 on the loss: both deployments sum the same
// floats in the same order.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <google/protobuf/util/json_util.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "experiments/cluster/local_cluster.h"
#include "proto/training.pb.h"
#include "tests/netns_probe.h"
#include "tests/process_runner.h"
#include "worker/train/dataset.h"

namespace testbed {
namespace {

using testing::CanBuildNamespaces;
namespace fs = std::filesystem;
using testing::TestbedProcess;

std::vector<proto::TrainingRow> ReadRows(const std::string& path) {
  std::vector<proto::TrainingRow> rows;
  for (const std::string& line : testing::Lines(testing::ReadFile(path))) {
    proto::TrainingRow row;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(line, &row).ok()) << line;
    rows.push_back(row);
  }
  return rows;
}

// Runs `testbed train ARGS --out DIR/NAME.jsonl`; its rows, after asserting it succeeded.
std::vector<proto::TrainingRow> Train(const std::string& dir, const std::string& name,
                                      std::vector<std::string> args,
                                      std::string* stderr_text = nullptr) {
  const std::string out = dir + "/" + name + ".jsonl";
  args.insert(args.begin(), "train");
  args.insert(args.end(), {"--out", out});
  TestbedProcess testbed(TESTBED_CLI_PATH, args, dir);
  const std::optional<int> status = testbed.Wait(std::chrono::seconds(120));
  EXPECT_EQ(status, 0) << name << "\n" << testbed.Stderr();
  if (stderr_text != nullptr) *stderr_text = testbed.Stderr();
  return ReadRows(out);
}

const std::vector<std::string> kSmallRun = {"-n", "2", "--hidden", "16", "--batch", "8",
                                            "--steps", "6", "--report-every", "2",
                                            "--seed", "7"};

std::vector<std::string> With(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

void ExpectSameTraining(const std::vector<proto::TrainingRow>& a,
                        const std::vector<proto::TrainingRow>& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), 4u);  // three progress rows and the run's
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i].loss(), b[i].loss(), 1e-6) << "row " << i;
    EXPECT_EQ(a[i].test_accuracy(), b[i].test_accuracy()) << "row " << i;
    EXPECT_EQ(a[i].step(), b[i].step());
    EXPECT_EQ(a[i].payload_bytes(), b[i].payload_bytes()) << "row " << i;
  }
}

class TrainDaemons : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!FashionMnistInstalled()) GTEST_SKIP() << "needs Debian's dataset-fashion-mnist";
    dir_ = testing::TempDir("train-daemons");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  std::string dir_;
};

TEST_F(TrainDaemons, DaemonsOnLoopbackTrainLikeThreads) {
  for (const std::string sync : {"ring", "ps"}) {
    const std::vector<std::string> args = With(kSmallRun, {"--sync", sync});
    const std::vector<proto::TrainingRow> threads = Train(dir_, sync + "-threads", args);
    const std::vector<proto::TrainingRow> daemons =
        Train(dir_, sync + "-daemons", With(args, {"--network", "loopback"}));
    ExpectSameTraining(threads, daemons);
    ASSERT_FALSE(daemons.empty());
    EXPECT_EQ(daemons.back().deployment(), "local-daemons") << sync;
    EXPECT_EQ(daemons.back().network(), "loopback");
    EXPECT_EQ(threads.back().deployment(),
              sync == "ps" ? "local-threads+server-daemons" : "local-threads");
  }
}

TEST_F(TrainDaemons, RunDeploymentTrainsOnDaemonsAlreadyRunning) {
  // Deployed daemons, as compose starts them: a job of their own, which the
  // command must present; they serve one run after another.
  const fs::path bin = dir_ + "/bin";
  fs::create_directories(bin);
  const fs::path cli_dir = fs::path(TESTBED_CLI_PATH).parent_path();
  fs::create_symlink(fs::canonical(cli_dir / ".." / "server" / "testbed-server"),
                     bin / "testbed-server");
  fs::create_symlink(fs::canonical(cli_dir / ".." / "worker" / "testbed-worker"),
                     bin / "testbed-worker");
  setenv("TESTBED_JOB_ID", "train-run-test", 1);
  setenv("TESTBED_TOKEN", "0123456789abcdef", 1);
  setenv("UCX_NET_DEVICES", "lo", 0);
  setenv("TESTBED_BIN_DIR", bin.c_str(), 1);  // the server and the worker, side by side
  LocalClusterOptions options;
  options.workers = 2;
  options.servers = 1;
  options.log_dir = dir_;
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  testing::DaemonReaper reaper;
  reaper.Add((*cluster)->server_pids());
  reaper.Add((*cluster)->worker_pids());
  const std::string coordinator = (*cluster)->coordinator();

  const std::vector<proto::TrainingRow> threads = Train(dir_, "threads", kSmallRun);
  const std::vector<proto::TrainingRow> ring =
      Train(dir_, "run-ring", With(kSmallRun, {"--deployment", "run", "-c", coordinator}));
  ExpectSameTraining(threads, ring);
  ASSERT_FALSE(ring.empty());
  EXPECT_EQ(ring.back().deployment(), "run");
  // The same daemons again, now through the parameter server.
  const std::vector<proto::TrainingRow> ps = Train(
      dir_, "run-ps", With(kSmallRun, {"--deployment", "run", "-c", coordinator, "--sync", "ps"}));
  ExpectSameTraining(threads, ps);
  EXPECT_TRUE((*cluster)->UnexpectedExits().empty());

  // A wrong token is refused, naming no run.
  setenv("TESTBED_TOKEN", "wrong", 1);
  TestbedProcess refused(TESTBED_CLI_PATH,
                         With({"train"}, With(kSmallRun, {"--deployment", "run", "-c", coordinator})),
                         dir_);
  EXPECT_EQ(refused.Wait(std::chrono::seconds(60)), 1) << refused.Stderr();
  unsetenv("TESTBED_TOKEN");
  unsetenv("TESTBED_JOB_ID");
  unsetenv("TESTBED_BIN_DIR");
  (*cluster)->Stop();
}

TEST_F(TrainDaemons, AKilledWorkerFailsTheRunNamingItsRank) {
  testing::DaemonReaper reaper;  // ends, by PID, whatever outlives the test
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"train", "-n", "3", "--network", "loopback", "--hidden", "256",
                          "--batch", "16", "--steps", "1000000", "--report-every", "100000",
                          "--log-dir", dir_ + "/logs"},
                         dir_);
  const std::optional<testing::DaemonPids> pids = testing::ParseDaemonPids(
      testbed.WaitForStderr("testbed-worker pids", std::chrono::seconds(30)));
  ASSERT_TRUE(pids.has_value()) << testbed.Stderr();
  reaper.Add(pids->all());
  ASSERT_EQ(pids->workers.size(), 3u);
  // Wait until every rank trains.
  for (int i = 0; i < 3; ++i) {
    const std::string log = dir_ + "/logs/worker-" + std::to_string(i) + ".log";
    ASSERT_TRUE(testing::LoggedNumber(log, "experiment ([0-9]+): training started",
                                      std::chrono::seconds(60)))
        << testing::ReadFile(log) << testbed.Stderr();
  }
  const std::optional<int> victim_rank =
      testing::LoggedNumber(dir_ + "/logs/worker-1.log", "rank ([0-9]+) of 3");
  ASSERT_TRUE(victim_rank.has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // mid-step
  const pid_t victim = pids->workers[1];
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  const std::optional<int> status = testbed.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value()) << "testbed train still running 60 s after a worker died";
  EXPECT_EQ(*status, 1);
  const std::string report = testbed.Stderr();
  EXPECT_TRUE(std::regex_search(
      report, std::regex("lost rank " + std::to_string(*victim_rank) + " \\(worker 1 \\([^)]* pid " +
                         std::to_string(victim) + "\\)\\)")))
      << report;
  EXPECT_NE(report.find("was killed by signal 9"), std::string::npos) << report;
  const std::vector<pid_t> survivors = testing::Survivors(pids->all(), std::chrono::seconds(10));
  EXPECT_TRUE(survivors.empty()) << "survived: " << ::testing::PrintToString(survivors);
}

TEST_F(TrainDaemons, TheEmulatedClusterTrainsAcrossRateLimitedLinks) {
  if (!CanBuildNamespaces()) GTEST_SKIP() << "needs root and network namespaces";
  std::string report;
  const std::vector<proto::TrainingRow> rows = Train(
      dir_, "netns", With(kSmallRun, {"--network", "netns", "--link-rate", "100mbit"}), &report);
  const std::vector<proto::TrainingRow> threads = Train(dir_, "threads", kSmallRun);
  ExpectSameTraining(threads, rows);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.back().deployment(), "local-netns");
  EXPECT_EQ(rows.back().link_rate(), "100mbit");
  // Nothing of the emulated cluster is left.
  std::smatch tag;
  ASSERT_TRUE(std::regex_search(report, tag, std::regex("emulated cluster (tb[0-9]+):"))) << report;
  const std::string listing = "/tmp/train-daemons-netns-" + std::to_string(getpid());
  ASSERT_EQ(std::system(("ip netns list > " + listing).c_str()), 0);
  const std::string namespaces = testing::ReadFile(listing);
  fs::remove(listing);
  EXPECT_EQ(namespaces.find(tag[1].str() + "-"), std::string::npos) << namespaces;
}

}  // namespace
}  // namespace testbed
