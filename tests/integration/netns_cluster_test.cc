// The emulated cluster: network namespaces, veth links to a bridge, tc limits
// - built, used by `testbed local --network netns`, and always removed: after
// a run, after a killed worker, and (when a run was SIGKILLed) by the next.
// Needs root; skipped otherwise.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <thread>
#include <sstream>
#include <vector>

#include "experiments/cluster/netns_fabric.h"
#include "tests/netns_probe.h"
#include "tests/process_runner.h"

namespace testbed {
namespace {

using testing::CanBuildNamespaces;
using testing::JsonField;
using testing::Lines;
using testing::TempDir;
using testing::ShellOutput;
using testing::TestbedProcess;

// Namespaces and root links whose names start with `prefix` ("tb123-", "tb123h").
std::vector<std::string> Leftovers(const std::string& tag) {
  std::vector<std::string> found;
  std::stringstream namespaces(ShellOutput("ip netns list 2>/dev/null"));
  for (std::string line; std::getline(namespaces, line);) {
    if (line.rfind(tag + "-", 0) == 0) found.push_back("netns " + line);
  }
  if (std::filesystem::exists("/sys/class/net/" + tag + "h")) found.push_back("link " + tag + "h");
  return found;
}

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CanBuildNamespaces()) GTEST_SKIP() << "needs root and network namespaces";
  }
};

TEST_F(NetnsTest, FabricLimitsEveryLinkBothWaysAndRemovesItAll) {
  const std::string tag = "tb" + std::to_string(getpid()) + "f";
  {
    auto fabric = NetnsFabric::Create({3, 100e6, tag});
    ASSERT_TRUE(fabric.ok()) << fabric.status();
    NetnsFabric& f = **fabric;
    EXPECT_EQ(Leftovers(tag).size(), 5u);  // three nodes, the hub and the harness link
    EXPECT_TRUE(std::filesystem::exists("/sys/class/net/" + tag + "h"));
    std::set<std::string> addresses;
    for (int node = 0; node < 3; ++node) {
      addresses.insert(f.address_of(node));
      // The node's side limits what it sends...
      const std::string out =
          ShellOutput("tc -n " + f.namespace_of(node) + " qdisc show dev eth0");
      EXPECT_NE(out.find("tbf"), std::string::npos) << out;
      EXPECT_NE(out.find("rate 100Mbit"), std::string::npos) << out;
      // ...the bridge's side what it receives.
      const std::string in =
          ShellOutput("tc -n " + f.hub_namespace() + " qdisc show dev n" + std::to_string(node));
      EXPECT_NE(in.find("rate 100Mbit"), std::string::npos) << in;
      EXPECT_NE(in.find("burst 12500b"), std::string::npos) << in;
      const std::string link =
          ShellOutput("ip -d -n " + f.namespace_of(node) + " link show dev eth0");
      EXPECT_NE(link.find("gso_max_size 11891 "), std::string::npos) << link;
      const std::string addr =
          ShellOutput("ip -n " + f.namespace_of(node) + " -4 addr show dev eth0");
      EXPECT_NE(addr.find(f.address_of(node) + "/24"), std::string::npos) << addr;
    }
    EXPECT_EQ(addresses.size(), 3u);
    // A node reaches another across the bridge: nobody listens on port 9, so
    // the answer is a refusal - not "no route" or a timeout.
    const std::string reach = ShellOutput("ip netns exec " + f.namespace_of(0) +
                                     " timeout 10 bash -c 'exec 3<>/dev/tcp/" + f.address_of(1) +
                                     "/9' 2>&1");
    EXPECT_NE(reach.find("Connection refused"), std::string::npos) << reach;
  }
  EXPECT_TRUE(Leftovers(tag).empty());
}

// A link's token bucket is 1 ms of its rate (two frames at the least), and no
// node sends an offloaded packet whose frames, headers and all, overflow the
// smallest bucket on its way out, its own link's or its rack's uplink's.
TEST(NetnsBuckets, HoldOneMillisecondOfTheRateAndBoundTheOffloadedPackets) {
  EXPECT_EQ(TbfBurstBytes(100e6), 12'500);
  EXPECT_EQ(TbfBurstBytes(1e9), 125'000);
  EXPECT_EQ(TbfBurstBytes(10e6), 2 * 1514);
  NetnsFabricOptions options{4, 100e6, ""};
  options.rack_of_node = {-1, 0, 0, 1};
  options.uplink_rate_bps = {1e9, 25e6};
  options.node_rate_bps = {1e9, 0, 0, 0};
  EXPECT_EQ(GsoMaxBytes(options, 0), 65'536);  // 1 Gbit/s on the spine: the kernel's cap
  EXPECT_EQ(GsoMaxBytes(options, 1), 11'891);  // its own 100 Mbit/s link: 12,500 less headers
  EXPECT_EQ(GsoMaxBytes(options, 3), 2'925);   // its rack's 25 Mbit/s uplink: 3,125 less headers
  EXPECT_EQ(GsoMaxBytes({2, 0, ""}, 1), 65'536);   // unlimited links
}

TEST_F(NetnsTest, StaleSetOfAKilledOwnerIsRemovedByTheNextRun) {
  // An owner that is gone: a child that has exited and been reaped.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);
  const std::string tag = "tb" + std::to_string(child);
  auto fabric = NetnsFabric::Create({2, 0, tag});
  ASSERT_TRUE(fabric.ok()) << fabric.status();
  // What a SIGKILLed harness leaves: the set, never destroyed. Kept reachable
  // to the end (a static never freed), so LeakSanitizer (.ci/sanitize) sees
  // an intent, not a leak.
  static auto* const abandoned = new std::vector<NetnsFabric*>;
  abandoned->push_back(fabric->release());
  ASSERT_FALSE(Leftovers(tag).empty());

  std::ostringstream log;
  EXPECT_GE(CleanStaleNetnsSets(log), 1);
  EXPECT_NE(log.str().find("removed a stale emulated cluster " + tag), std::string::npos)
      << log.str();
  EXPECT_TRUE(Leftovers(tag).empty());
}

TEST_F(NetnsTest, LocalRunIsExactCountsWireBytesAndLeavesNothingBehind) {
  const std::string dir = TempDir("netns");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--network", "netns", "--link-rate", "1gbit", "--workers", "3",
                          "--servers", "2", "--algorithms", "ps,ring,butterfly", "--sizes",
                          "4004,4MiB", "--iters", "2", "--warmup", "1", "--format", "json",
                          "--out", dir + "/r.jsonl"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(3));
  ASSERT_TRUE(status.has_value()) << "testbed local did not finish\n" << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 6u) << testbed.Stdout();
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    EXPECT_EQ(JsonField(row, "wrong"), "0");
    EXPECT_EQ(JsonField(row, "payload_bytes_total"), JsonField(row, "theory_bytes_total"));
    EXPECT_NE(JsonField(row, "transport").find("eth0"), std::string::npos);
    EXPECT_GT(std::atof(JsonField(row, "model_time_us").c_str()), 0);
    const double payload = std::atof(JsonField(row, "payload_bytes_total").c_str());
    const double sent = std::atof(JsonField(row, "wire_bytes_sent_total").c_str());
    const double received = std::atof(JsonField(row, "wire_bytes_received_total").c_str());
    // The workers' interfaces carried the payload: all-reduce bytes leave one
    // worker for another; ps pushes leave the workers and pulls arrive there.
    const double wire = JsonField(row, "algorithm") == "ps" ? sent + received : sent;
    EXPECT_GE(wire, payload);
    // Headers and acknowledgements on top: under 10% for a 4 MiB message
    // (the stated overhead; veth counts offloaded segments' headers once).
    if (JsonField(row, "bytes") == "4194304") {
      EXPECT_LE(wire, payload * 1.10);
    }
  }
  // The course table, beside the results.
  const std::string table = testing::ReadFile(dir + "/r.md");
  EXPECT_NE(table.find("| ring | ucx:tcp/eth0"), std::string::npos) << table;
  EXPECT_NE(table.find("## N = 3, M = 4MiB"), std::string::npos) << table;

  std::smatch cluster;
  const std::string err = testbed.Stderr();
  ASSERT_TRUE(std::regex_search(err, cluster, std::regex("emulated cluster (tb[0-9]+):"))) << err;
  EXPECT_TRUE(Leftovers(cluster[1].str()).empty());
  std::filesystem::remove_all(dir);
}

// An idle link is no faster than its rate: tree at N = 2 sends 256 KiB one way,
// then back, each direction on a link that idled before. With a 96 KiB bucket
// the first 96 KiB of each passed at once and the run took 0.68x its model.
TEST_F(NetnsTest, AnIdleLinkPassesNoMoreThanItsRate) {
  const std::string dir = TempDir("netns-idle");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--network", "netns", "--link-rate", "100mbit", "--workers",
                          "2", "--algorithms", "tree", "--sizes", "256KiB", "--iters", "7",
                          "--warmup", "1", "--format", "json"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(3));
  ASSERT_TRUE(status.has_value()) << "testbed local did not finish\n" << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 1u) << testbed.Stdout();
  EXPECT_EQ(JsonField(rows[0], "wrong"), "0");
  const double p50 = std::atof(JsonField(rows[0], "time_us_p50").c_str());
  const double model = std::atof(JsonField(rows[0], "model_time_us").c_str());
  ASSERT_GT(model, 0);
  EXPECT_GE(p50, 0.85 * model) << rows[0];
  std::filesystem::remove_all(dir);
}

TEST_F(NetnsTest, KilledWorkerFailsTheRunAndLeavesNothingBehind) {
  const std::string dir = TempDir("netns-kill");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--network", "netns", "--link-rate", "1gbit", "--workers", "3",
                          "--algorithms", "ring", "--sizes", "1MiB", "--iters", "100000",
                          "--warmup", "0"},
                         dir);
  std::smatch found;
  const std::string err = testbed.WaitForStderr("testbed-worker pids", std::chrono::seconds(60));
  ASSERT_TRUE(std::regex_search(
      err, found,
      std::regex("emulated cluster (tb[0-9]+):[^]*server pids ([0-9]+) .*testbed-worker pids "
                 "([0-9]+) ([0-9]+) ([0-9]+)")))
      << err;
  const std::string tag = found[1].str();
  std::vector<pid_t> daemons;
  for (int i = 2; i <= 5; ++i) daemons.push_back(std::stoi(found[i].str()));
  ASSERT_TRUE(testing::WaitForSweeps(testing::LogDir(err), 3, std::chrono::seconds(30))) << err;
  ASSERT_EQ(kill(daemons[2], SIGKILL), 0);
  const auto status = testbed.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value()) << "testbed local still running 60 s after a worker died";
  EXPECT_NE(*status, 0);
  EXPECT_NE(testbed.Stderr().find("lost rank"), std::string::npos) << testbed.Stderr();
  for (pid_t pid : daemons) EXPECT_NE(kill(pid, 0), 0) << "pid " << pid << " survived";
  EXPECT_TRUE(Leftovers(tag).empty());
  std::filesystem::remove_all(dir);
}

TEST_F(NetnsTest, CtrlCRemovesTheClusterToo) {
  const std::string dir = TempDir("netns-sigint");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--network", "netns", "--workers", "2", "--algorithms", "ring",
                          "--sizes", "1MiB", "--iters", "100000"},
                         dir);
  const std::string err = testbed.WaitForStderr("testbed-worker pids", std::chrono::seconds(60));
  std::smatch found;
  ASSERT_TRUE(std::regex_search(err, found, std::regex("emulated cluster (tb[0-9]+):"))) << err;
  ASSERT_TRUE(testing::WaitForSweeps(testing::LogDir(err), 2, std::chrono::seconds(30))) << err;
  ASSERT_EQ(kill(testbed.pid(), SIGINT), 0);
  const auto status = testbed.Wait(std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value()) << "testbed local ignored Ctrl-C";
  EXPECT_EQ(*status, 130) << testbed.Stderr();
  EXPECT_TRUE(Leftovers(found[1].str()).empty());
  std::filesystem::remove_all(dir);
}

TEST(NetnsFlags, WithoutRootItSaysSoAndStartsNothing) {
  const std::string dir = TempDir("netns-nonroot");
  std::vector<std::string> args = {"local", "--network", "netns", "-n", "2", "-a", "ring",
                                   "-s", "4KiB"};
  std::string binary = TESTBED_CLI_PATH;
  if (geteuid() == 0) {  // drop to nobody for this one run
    args.insert(args.begin(), {"--reuid=65534", "--regid=65534", "--clear-groups", binary});
    binary = "/usr/bin/setpriv";
    if (access(binary.c_str(), X_OK) != 0) GTEST_SKIP() << "no setpriv to drop root";
  }
  TestbedProcess testbed(binary, args, dir);
  const auto status = testbed.Wait(std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 2);
  EXPECT_NE(testbed.Stderr().find("--network netns needs root"), std::string::npos)
      << testbed.Stderr();
  EXPECT_EQ(testbed.Stderr().find("pids"), std::string::npos) << testbed.Stderr();
  std::filesystem::remove_all(dir);
}

TEST(NetnsFlags, LinkRateNeedsTheEmulatedCluster) {
  const std::string dir = TempDir("netns-flags");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--link-rate", "1gbit", "-a", "ring", "-s", "4KiB"}, dir);
  const auto status = testbed.Wait(std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 2);
  EXPECT_NE(testbed.Stderr().find("a link rate needs the netns network"), std::string::npos)
      << testbed.Stderr();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace testbed
