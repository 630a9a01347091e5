// The parameter server for real: S testbed-server daemons and N workers on
// loopback through `testbed local`. Pulled values are the exact sum, payload
// is 2 N M in total and 2 N times each shard's slice through each shard.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <optional>
#include <tuple>

#include "tests/process_runner.h"

namespace testbed {
namespace {

using testing::JsonField;
using testing::Lines;
using testing::TempDir;
using testing::TestbedProcess;


// "[a, b]" of a JSON list field.
std::string JsonList(const std::string& line, const std::string& key) {
  const std::size_t at = line.find("\"" + key + "\": [");
  if (at == std::string::npos) return "";
  const std::size_t open = line.find('[', at);
  return line.substr(open, line.find(']', open) - open + 1);
}

class ParameterServerSweep : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ParameterServerSweep, PullsTheExactSumThroughEveryShard) {
  const auto [n, s] = GetParam();
  const std::string dir = TempDir("sweep");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", std::to_string(n), "--servers", std::to_string(s),
                          "--algorithms", "ps", "--sizes", "4,4004,262148", "--iters", "2",
                          "--warmup", "1", "--format", "json"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(3));
  ASSERT_TRUE(status.has_value()) << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 3u) << testbed.Stdout();
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    const long long bytes = std::stoll(JsonField(row, "bytes"));
    EXPECT_EQ(JsonField(row, "wrong"), "0");
    EXPECT_EQ(JsonField(row, "theory_bytes_total"), std::to_string(2LL * n * bytes));
    EXPECT_EQ(JsonField(row, "payload_bytes_total"), JsonField(row, "theory_bytes_total"));
    EXPECT_EQ(JsonField(row, "servers"), std::to_string(s));
    EXPECT_EQ(JsonList(row, "shard_payload_bytes"), JsonList(row, "shard_theory_bytes"));
    EXPECT_NE(JsonList(row, "shard_payload_bytes"), "");
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(WorkersAndShards, ParameterServerSweep,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Values(1, 2, 3)),
                         [](const auto& info) {
                           return "N" + std::to_string(std::get<0>(info.param)) + "_S" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(ParameterServerLarge, A256MiBTensorTravelsInChunks) {
  const std::string dir = TempDir("large");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "2", "--servers", "2", "--algorithms", "ps",
                          "--sizes", "256MiB", "--iters", "1", "--warmup", "0", "--format",
                          "json", "--timeout", "120"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(4));
  ASSERT_TRUE(status.has_value()) << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(JsonField(rows[0], "wrong"), "0");
  EXPECT_EQ(JsonField(rows[0], "payload_bytes_total"), std::to_string(2LL * 2 * (256LL << 20)));
  std::filesystem::remove_all(dir);
}

// The PIDs of every daemon, once `testbed local` has named them (it names
// servers and workers on one line), or nothing after 30 s.
std::optional<testing::DaemonPids> Daemons(const TestbedProcess& testbed) {
  return testing::ParseDaemonPids(
      testbed.WaitForStderr("testbed-worker pids", std::chrono::seconds(30)));
}

// What every worker's own log and exit say, and that nothing is left running,
// after a shard failed: every worker's log names the failed shard by the
// number the shard's own log gives itself, and every exit the harness
// reports is a worker's own failure (status 1).
void ExpectTheWorkersFailedOnTheShard(const TestbedProcess& testbed,
                                      const testing::DaemonPids& pids, const std::string& logs,
                                      int shard, const std::string& worker_log_pattern) {
  const std::string report = testbed.Stderr();
  for (std::size_t i = 0; i < pids.workers.size(); ++i) {
    SCOPED_TRACE("worker " + std::to_string(i));
    // Each worker exited by a failure of its own, which the harness reports.
    const std::string exit =
        testing::ExitReport(report, "testbed-worker " + std::to_string(i), pids.workers[i]);
    EXPECT_EQ(exit, "exited with status 1") << report;
    const std::string log = testing::ReadFile(logs + "/worker-" + std::to_string(i) + ".log");
    EXPECT_NE(log.find("parameter server shard " + std::to_string(shard)), std::string::npos)
        << log;
    EXPECT_TRUE(std::regex_search(log, std::regex(worker_log_pattern))) << log;
    EXPECT_EQ(log.find("fatal: gRPC still holds"), std::string::npos) << log;
  }
  // The server and every daemon ended.
  const std::vector<pid_t> survivors = testing::Survivors(pids.all(), std::chrono::seconds(10));
  EXPECT_TRUE(survivors.empty()) << "survived: " << ::testing::PrintToString(survivors);
}

TEST(ParameterServerFailure, KilledShardFailsTheWorkersWithAClearError) {
  const std::string dir = TempDir("kill");
  testing::DaemonReaper reaper;  // ends, by PID, whatever outlives the test
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "2", "--servers", "2", "--algorithms", "ps",
                          "--sizes", "4MiB", "--iters", "100000", "--warmup", "0", "--log-dir",
                          dir + "/logs"},
                         dir);
  const std::optional<testing::DaemonPids> pids = Daemons(testbed);
  ASSERT_TRUE(pids.has_value()) << testbed.Stderr();
  reaper.Add(pids->all());
  ASSERT_EQ(pids->servers.size(), 2u);
  ASSERT_EQ(pids->workers.size(), 2u);
  // The victim's shard number, from its own log.
  const std::optional<int> shard = testing::LoggedNumber(
      dir + "/logs/server-1.log", "as parameter-server shard ([0-9]+)", std::chrono::seconds(30));
  ASSERT_TRUE(shard.has_value()) << testing::ReadFile(dir + "/logs/server-1.log");
  ASSERT_TRUE(testing::WaitForSweeps(dir + "/logs", 2, std::chrono::seconds(30)))
      << testing::ReadFile(dir + "/logs/worker-0.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few steps into the sweep
  ASSERT_EQ(kill(pids->servers[1], SIGKILL), 0);
  const auto killed_at = std::chrono::steady_clock::now();
  const auto status = testbed.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value()) << "testbed local still running 60 s after a shard died";
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, std::chrono::seconds(30));
  EXPECT_EQ(*status, 1) << testbed.Stderr();
  EXPECT_NE(testbed.Stderr().find("parameter server shard " + std::to_string(*shard)),
            std::string::npos)
      << testbed.Stderr();
  const std::string exit = testing::ExitReport(testbed.Stderr(), "testbed-server 1", pids->servers[1]);
  EXPECT_EQ(exit, "was killed by signal 9") << testbed.Stderr();
  ExpectTheWorkersFailedOnTheShard(testbed, *pids, dir + "/logs", *shard, ".");
  std::filesystem::remove_all(dir);
}

// A shard that stops answering (SIGSTOP: its socket stays open, nobody reads
// it) leaves pushed data queued in the workers' connections. The workers must
// fail on their timeout, let go of that data and exit, not hang or crash.
TEST(ParameterServerFailure, StalledShardFailsTheWorkersOnTheirTimeout) {
  const std::string dir = TempDir("stall");
  testing::DaemonReaper reaper;  // ends, by PID, whatever outlives the test
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "2", "--servers", "2", "--algorithms", "ps",
                          "--sizes", "32MiB", "--iters", "100000", "--warmup", "0", "--timeout",
                          "5", "--log-dir", dir + "/logs"},
                         dir);
  const std::optional<testing::DaemonPids> pids = Daemons(testbed);
  ASSERT_TRUE(pids.has_value()) << testbed.Stderr();
  reaper.Add(pids->all());
  ASSERT_EQ(pids->servers.size(), 2u);
  ASSERT_EQ(pids->workers.size(), 2u);
  const std::optional<int> shard = testing::LoggedNumber(
      dir + "/logs/server-1.log", "as parameter-server shard ([0-9]+)", std::chrono::seconds(30));
  ASSERT_TRUE(shard.has_value()) << testing::ReadFile(dir + "/logs/server-1.log");
  ASSERT_TRUE(testing::WaitForSweeps(dir + "/logs", 2, std::chrono::seconds(30)))
      << testing::ReadFile(dir + "/logs/worker-0.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few steps into the sweep
  ASSERT_EQ(kill(pids->servers[1], SIGSTOP), 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  const auto status = testbed.Wait(std::chrono::seconds(60));
  const auto took = std::chrono::steady_clock::now() - stopped_at;
  ASSERT_TRUE(status.has_value()) << "testbed local still running 60 s after a shard stalled";
  EXPECT_LT(took, std::chrono::seconds(40));
  EXPECT_EQ(*status, 1) << testbed.Stderr();
  EXPECT_EQ(testbed.Stderr().find("fatal: gRPC still holds"), std::string::npos)
      << testbed.Stderr();
  // The workers failed on their own deadline against that shard.
  ExpectTheWorkersFailedOnTheShard(testbed, *pids, dir + "/logs", *shard,
                                   "DEADLINE_EXCEEDED|[Dd]eadline");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace testbed
