// Inputs a hostile or careless user gives, as tests that fail against the
// defect: a results file whose row names more ranks than the testbed allows
// (a fit once computed for hours on one), and a signal in the middle of a long
// computation (it was held back until the computation ended).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "tests/process_runner.h"

namespace testbed {
namespace {

using testing::DaemonReaper;
using testing::ParseDaemonPids;
using testing::Survivors;
using testing::TempDir;
using testing::TestbedProcess;

std::string ResultLine(const std::string& algorithm, int workers, long long bytes, double us) {
  return "{\"record\": \"result\", \"algorithm\": \"" + algorithm + "\", \"workers\": " +
         std::to_string(workers) + ", \"bytes\": " + std::to_string(bytes) +
         ", \"time_us_avg\": " + std::to_string(us) + "}\n";
}

// The file of the report: an ordinary results file whose ring row says
// 100,000 workers. Refused naming the file, the line and the limit, before a
// daemon is started.
TEST(Adversarial, ATuningRowOverTheWorkerLimitIsRefusedBeforeAnyDaemonStarts) {
  const std::string dir = TempDir("adversarial-limit");
  const std::string tuning = dir + "/tuning.jsonl";
  std::ofstream(tuning) << ResultLine("ring", 4, 4096, 100)
                        << ResultLine("ring", 100000, 1 << 20, 900);
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "-n", "2", "-a", "auto", "-s", "4KiB", "--iters", "1",
                          "--tuning", tuning},
                         dir);
  const auto status = testbed.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value()) << "still running after 60 s\n" << testbed.Stderr();
  EXPECT_EQ(*status, 2) << testbed.Stderr();
  EXPECT_EQ(testbed.Stderr(), "error: " + tuning +
                                  ": line 2: workers 100000 is over the limit of 1024 "
                                  "(common/limits.h)\n");
  std::filesystem::remove_all(dir);
}

// SIGTERM while -a auto fits its candidates to a large tuning file (ring rows
// at N = 1024, each a schedule of about two million steps to read): the fit
// stops at its next estimate, the daemons are stopped as after any run, and
// the exit is 130. Before, the fit ran to its end with the signal held back.
TEST(Adversarial, SigtermInTheMiddleOfAFitEndsTheRunAndItsDaemons) {
  const std::string dir = TempDir("adversarial-signal");
  const std::string tuning = dir + "/tuning.jsonl";
  {
    std::ofstream out(tuning);
    for (int i = 1; i <= 600; ++i) out << ResultLine("ring", 1024, 4096LL * i, 100.0 + i);
  }
  DaemonReaper reaper;
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "-n", "2", "-a", "auto", "-s", "4KiB", "--iters", "1",
                          "--tuning", tuning},
                         dir);
  const std::string started = testbed.WaitForStderr("testbed-worker pids", std::chrono::seconds(60));
  const auto pids = ParseDaemonPids(started);
  ASSERT_TRUE(pids.has_value()) << started;
  reaper.Add(pids->all());
  // The fit begins once the daemons are up; a second in, it is well inside
  // 600 estimates of a few hundred milliseconds each.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_FALSE(testbed.Wait(std::chrono::milliseconds(0)).has_value()) << testbed.Stderr();
  const auto signalled = std::chrono::steady_clock::now();
  kill(testbed.pid(), SIGTERM);
  const auto status = testbed.Wait(std::chrono::seconds(30));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  ASSERT_TRUE(status.has_value()) << "SIGTERM did not end testbed local within 30 s\n"
                                  << testbed.Stderr();
  std::cerr << "testbed local ended " << seconds << " s after SIGTERM\n";
  EXPECT_EQ(*status, 130) << testbed.Stderr();
  EXPECT_NE(testbed.Stderr().find("testbed: interrupted"), std::string::npos) << testbed.Stderr();
  EXPECT_TRUE(Survivors(pids->all(), std::chrono::seconds(10)).empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace testbed
