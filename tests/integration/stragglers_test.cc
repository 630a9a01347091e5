// Stragglers on real daemons: a rank that begins every collective late (the
// fabric's slow_ranks) holds everyone's time back by its delay while its own
// median is the shortest, and `testbed report` lists the row with both ranks;
// on the emulated cluster a host at a quarter of the link rate slows the ring
// every round (needs root; skipped otherwise).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/netns_probe.h"
#include "tests/process_runner.h"

namespace testbed {
namespace {

using testing::CanBuildNamespaces;
using testing::JsonField;
using testing::JsonNumbers;
using testing::Lines;
using testing::RunCli;
using testing::TempDir;
using testing::TestbedProcess;

std::vector<std::string> RunLocal(const std::string& dir, std::vector<std::string> args) {
  TestbedProcess testbed(TESTBED_CLI_PATH, args, dir);
  const auto status = testbed.Wait(std::chrono::minutes(3));
  EXPECT_TRUE(status.has_value()) << "testbed local did not finish\n" << testbed.Stderr();
  EXPECT_EQ(status.value_or(-1), 0) << testbed.Stderr();
  return Lines(testbed.Stdout());
}

TEST(Stragglers, ARankThatBeginsLateHoldsEveryoneBackAndIsTheFastest) {
  const std::string dir = TempDir("late-rank");
  const std::vector<std::string> rows =
      RunLocal(dir, {"local", "--workers", "3", "--algorithms", "ring,ps", "--sizes", "4KiB",
                "--iters", "3", "--warmup", "1", "--slow-rank", "1=50ms", "--format", "json",
                "--out", dir + "/r.jsonl"});
  ASSERT_EQ(rows.size(), 2u);
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    EXPECT_EQ(JsonField(row, "wrong"), "0");
    EXPECT_EQ(JsonField(row, "fabric"), "flat, worker 1 50000 us late");
    EXPECT_GE(std::atof(JsonField(row, "time_us_p50").c_str()), 50000);
    const std::vector<double> ranks = JsonNumbers(row, "rank_time_us_p50");
    ASSERT_EQ(ranks.size(), 3u);
    EXPECT_LT(ranks[1], 25000);  // it found the others waiting
    EXPECT_GE(ranks[0], 45000);
    EXPECT_GE(ranks[2], 45000);
  }
  const auto [status, report] = RunCli("report " + dir + "/r.jsonl");
  ASSERT_EQ(status, 0) << report;
  EXPECT_NE(report.find("## Ranks apart"), std::string::npos) << report;
  EXPECT_TRUE(std::regex_search(report, std::regex("\\| 3 \\| 4.0 KiB \\| ring \\| flat, worker 1 "
                                                   "50000 us late \\| [02] \\| [0-9.]+ ms \\| 1 \\|")))
      << report;
  std::filesystem::remove_all(dir);
}

// Worker 2 at 25 Mbit/s beside 100 Mbit/s: every ring round waits for it (the
// model: 4x), and its row carries the rates in its fabric.
TEST(Stragglers, ASlowHostLinkSlowsEveryRingRound) {
  if (!CanBuildNamespaces()) GTEST_SKIP() << "needs root and network namespaces";
  const std::string dir = TempDir("slow-link");
  const std::vector<std::string> rows =
      RunLocal(dir, {"local", "--network", "netns", "--link-rate", "100mbit", "--workers", "3",
                "--algorithms", "ring", "--sizes", "1MiB", "--iters", "2", "--warmup", "1",
                "--host-link", "2=25mbit", "--format", "json"});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(JsonField(rows[0], "wrong"), "0");
  EXPECT_EQ(JsonField(rows[0], "fabric"), "flat, worker 2's link 25mbit");
  const double measured = std::atof(JsonField(rows[0], "time_us_p50").c_str());
  const double model = std::atof(JsonField(rows[0], "model_time_us").c_str());
  // 4 rounds of M/3 through the 25 Mbit/s link: at least the link's time.
  EXPECT_GT(model, 4 * 8.0 * (1 << 20) / 3 / 25e6 * 1e6);
  EXPECT_GT(measured, 0.9 * model) << "faster than the slow link allows";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace testbed
