// The tests' one process runner (tests/process_runner.h). The integration
// tests find the daemons they must end through the line `testbed local`
// prints and ParseDaemonPids reads; a line caught half written once lost a
// test its PIDs (sanitize CI). RunCommand must end a hung command and
// everything it started, so that a test fails instead of hanging the suite.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/process_runner.h"

namespace testbed::testing {
namespace {

TEST(ProcessRunnerTest, WaitForStderrReturnsTheWholeLineHoldingTheText) {
  const std::string dir = TempDir("process-runner");
  // The line arrives in two writes, the numbers half a second after the words.
  TestbedProcess writer("/bin/sh",
                        {"-c", "printf 'testbed-worker pids' >&2; sleep 0.5; printf ' 7 8;\\n' >&2"},
                        dir);
  const std::string err = writer.WaitForStderr("testbed-worker pids", std::chrono::seconds(10));
  EXPECT_EQ(err, "testbed-worker pids 7 8;\n");
  EXPECT_EQ(writer.Wait(std::chrono::seconds(10)), 0);
  std::filesystem::remove_all(dir);
}

TEST(ProcessRunnerTest, ParseDaemonPidsReadsTheWholeLineAndRefusesACutOne) {
  const std::string line =
      "testbed local: testbed-server pids 10 11 (coordinator on 127.0.0.1:5000); "
      "testbed-worker pids 20 21 22; logs in /tmp/x\n";
  const std::optional<DaemonPids> pids = ParseDaemonPids(line);
  ASSERT_TRUE(pids.has_value());
  EXPECT_EQ(pids->servers, (std::vector<pid_t>{10, 11}));
  EXPECT_EQ(pids->workers, (std::vector<pid_t>{20, 21, 22}));
  EXPECT_EQ(pids->all().size(), 5u);
  const std::string words = "testbed-worker pids";
  EXPECT_FALSE(ParseDaemonPids(line.substr(0, line.find(words) + words.size())));
  EXPECT_FALSE(ParseDaemonPids(line.substr(0, line.find("20 21") + 3)));
}

TEST(ProcessRunnerTest, RunCommandReturnsTheStatusAndTheOutput) {
  EXPECT_EQ(RunCommand("printf 'a b'; exit 3", std::chrono::seconds(60)),
            (std::pair<int, std::string>{3, "a b"}));
  EXPECT_EQ(RunProgram("/bin/sh", "-c 'echo out; echo err >&2'"),
            (std::pair<int, std::string>{0, "out\nerr\n"}));
  EXPECT_EQ(ShellOutput("echo 'quoted  text'"), "quoted  text\n");
}

TEST(ProcessRunnerTest, RunCommandKillsAHungCommandAndWhatItStartedAfterItsTimeout) {
  // The shell prints its background child's PID, then both would sleep for a
  // minute: past the timeout the whole process group must be gone.
  const auto start = std::chrono::steady_clock::now();
  const auto [status, output] =
      RunCommand("sleep 60 & echo $!; sleep 60", std::chrono::milliseconds(500));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(status, -1);
  EXPECT_NE(output.find("killed after 500 ms"), std::string::npos) << output;
  const std::vector<pid_t> child = ParsePids(output.substr(0, output.find('\n')));
  ASSERT_EQ(child.size(), 1u) << output;
  EXPECT_TRUE(Survivors(child, std::chrono::seconds(10)).empty()) << "pid " << child[0];
}

}  // namespace
}  // namespace testbed::testing
