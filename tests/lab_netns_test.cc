// `testbed lab --network netns --link-rate R`: a run from the page crosses the
// emulated cluster's rate-limited links (each daemon in its own namespace,
// UCX over its eth0), and the lab removes every namespace when it ends.
// Needs root and network namespaces; skipped otherwise. The lab is ended by
// its PID (TestbedProcess), also on failure.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include <httplib.h>
#include <gtest/gtest.h>

#include "tests/netns_probe.h"
#include "tests/process_runner.h"
#include "tests/lab_http.h"

namespace testbed {
namespace {

using testing::CanBuildNamespaces;
using testing::ReadFile;
using testing::ShellOutput;
using testing::TestbedProcess;

int NamespacesTagged(const std::string& tag) {
  const std::string list = ShellOutput("ip netns list 2>/dev/null");
  int count = 0;
  for (std::size_t at = list.find(tag + "-"); at != std::string::npos;
       at = list.find(tag + "-", at + 1)) {
    ++count;
  }
  return count;
}

int LabPort(const std::string& stdout_path) {
  const std::regex open_line(R"(open http://[^:]+:(\d+)/)");
  for (int tries = 0; tries < 200; ++tries) {
    std::smatch match;
    const std::string text = ReadFile(stdout_path);
    if (std::regex_search(text, match, open_line)) return std::stoi(match[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

TEST(LabNetns, ARunCrossesTheEmulatedLinksAndTheNamespacesGoAtTheEnd) {
  if (!CanBuildNamespaces()) GTEST_SKIP() << "needs root and network namespaces";
  const std::string dir = testing::TempDir("lab_netns_test");
  auto lab = std::make_unique<TestbedProcess>(
      TESTBED_CLI_PATH,
      std::vector<std::string>{"lab", "--listen", "127.0.0.1:0", "--network", "netns",
                               "--link-rate", "100mbit", "--workers", "2"},
      dir);
  const std::string tag = "tb" + std::to_string(lab->pid());
  const int port = LabPort(dir + "/stdout");
  ASSERT_GT(port, 0) << ReadFile(dir + "/stderr");

  httplib::Client client("127.0.0.1", port);
  auto posted = client.Post("/api/run?collective=ring&n=2&bytes=256KiB&iters=2", "", "text/plain");
  ASSERT_TRUE(posted);
  ASSERT_EQ(posted->status, 202) << posted->body;
  const std::string run = testing::WaitForLabRun(client);
  EXPECT_NE(run.find("\"state\":\"done\""), std::string::npos) << run;
  EXPECT_TRUE(std::regex_search(run, std::regex(R"("wrong": ?0\b)"))) << run;
  // UCX went over each node's own link, and the rows say where they ran.
  EXPECT_NE(run.find("eth0"), std::string::npos) << run;
  EXPECT_NE(run.find("network namespaces (" + tag + "), links 100mbit"), std::string::npos)
      << run;
  EXPECT_EQ(NamespacesTagged(tag), 4) << "hub, a server and two workers";

  ASSERT_EQ(kill(lab->pid(), SIGTERM), 0);
  EXPECT_EQ(lab->Wait(std::chrono::seconds(30)), 0) << ReadFile(dir + "/stderr");
  EXPECT_EQ(NamespacesTagged(tag), 0) << ShellOutput("ip netns list");
  EXPECT_FALSE(std::filesystem::exists("/sys/class/net/" + tag + "h"));
}

}  // namespace
}  // namespace testbed
