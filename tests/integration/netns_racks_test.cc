// The emulated fabric with racks (experiments/cluster/netns_fabric.h): one
// bridge per rack behind a shaped uplink to the spine, built, limited both
// ways, and removed; `testbed local --network netns` on two racks runs
// hierarchical and ring exactly, and the bytes its uplinks counted are the
// ones the schedules say, headers on top. Needs root; skipped otherwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>
#include <vector>

#include "experiments/cluster/netns_fabric.h"
#include "tests/netns_probe.h"
#include "tests/process_runner.h"

namespace testbed {
namespace {

using testing::CanBuildNamespaces;
using testing::JsonField;
using testing::JsonNumbers;
using testing::Lines;
using testing::ShellOutput;
using testing::TempDir;
using testing::TestbedProcess;

bool AnyNamespaceOf(const std::string& tag) {
  return ShellOutput("ip netns list 2>/dev/null").find(tag + "-") != std::string::npos;
}

class NetnsRacksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CanBuildNamespaces()) GTEST_SKIP() << "needs root and network namespaces";
  }
};

TEST_F(NetnsRacksTest, EachRackHangsOffItsBridgeBehindAnUplinkLimitedBothWays) {
  const std::string tag = "tb" + std::to_string(getpid()) + "r";
  {
    // Node 0 on the spine, nodes 1-2 in rack 0, node 3 in rack 1 with a slow link.
    NetnsFabricOptions options{4, 100e6, tag};
    options.rack_of_node = {-1, 0, 0, 1};
    options.uplink_rate_bps = {50e6, 25e6};
    options.node_rate_bps = {0, 0, 0, 10e6};
    options.link_queue_us = 50'000;
    auto fabric = NetnsFabric::Create(options);
    ASSERT_TRUE(fabric.ok()) << fabric.status();
    NetnsFabric& f = **fabric;
    EXPECT_EQ(f.racks(), 2);
    const std::string hub = "tc -n " + f.hub_namespace() + " qdisc show dev ";
    EXPECT_NE(ShellOutput(hub + "u0").find("rate 50Mbit"), std::string::npos);
    EXPECT_NE(ShellOutput(hub + "u0").find("lat 50ms"), std::string::npos) << ShellOutput(hub + "u0");
    EXPECT_NE(ShellOutput(hub + "n1").find("lat 50ms"), std::string::npos) << ShellOutput(hub + "n1");
    EXPECT_NE(ShellOutput(hub + "s0").find("rate 50Mbit"), std::string::npos);
    EXPECT_NE(ShellOutput(hub + "u1").find("rate 25Mbit"), std::string::npos);
    EXPECT_NE(ShellOutput(hub + "s1").find("rate 25Mbit"), std::string::npos);
    EXPECT_NE(ShellOutput("tc -n " + f.namespace_of(3) + " qdisc show dev eth0").find("rate 10Mbit"),
              std::string::npos);
    const std::string ports = ShellOutput("ip -n " + f.hub_namespace() + " -o link show");
    EXPECT_NE(ports.find("n1@"), std::string::npos) << ports;
    EXPECT_NE(ports.find("master r0"), std::string::npos) << ports;
    EXPECT_NE(ports.find("master r1"), std::string::npos) << ports;
    // Across both uplinks: a refusal, not "no route" or a timeout.
    const std::string reach = ShellOutput("ip netns exec " + f.namespace_of(1) +
                                          " timeout 10 bash -c 'exec 3<>/dev/tcp/" +
                                          f.address_of(3) + "/9' 2>&1");
    EXPECT_NE(reach.find("Connection refused"), std::string::npos) << reach;
    const auto counters = f.UplinkCounters();
    ASSERT_TRUE(counters.ok()) << counters.status();
    ASSERT_EQ(counters->size(), 2u);
    EXPECT_GT((*counters)[0].up, 0u);  // the probe's packets went up rack 0's uplink
    EXPECT_GT((*counters)[1].down, 0u);
  }
  EXPECT_FALSE(AnyNamespaceOf(tag));
}

// Two racks of two at 1 Gbit/s behind 2:1 uplinks: fast enough for a test,
// and every cross-rack byte still goes through an uplink's veth pair.
TEST_F(NetnsRacksTest, TwoRacksRunExactAndTheUplinksCountWhatTheSchedulesSay) {
  const std::string dir = TempDir("netns-racks");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--network", "netns", "--link-rate", "1gbit", "--workers",
                          "4", "--racks", "2", "--oversubscription", "2", "--algorithms",
                          "ring,hierarchical,ps", "--sizes", "1MiB", "--iters", "2", "--warmup",
                          "1", "--format", "json"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(3));
  ASSERT_TRUE(status.has_value()) << "testbed local did not finish\n" << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 3u) << testbed.Stdout();
  double theory = 0, counted = 0;
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    EXPECT_EQ(JsonField(row, "wrong"), "0");
    EXPECT_EQ(JsonField(row, "fabric"), "2 racks, 2:1 uplinks, packed");
    const std::vector<double> up = JsonNumbers(row, "uplink_theory_bytes_up");
    const std::vector<double> wire = JsonNumbers(row, "uplink_wire_bytes_up");
    ASSERT_EQ(up.size(), 2u);
    ASSERT_EQ(wire.size(), 2u);
    for (int r = 0; r < 2; ++r) {
      theory += 3 * up[r];  // warm-up and timed iterations
      counted += wire[r];
    }
  }
  // Per rack and direction: ring 2(N-1)/N M = 1.5 MiB, hierarchical M, ps 2 M.
  EXPECT_EQ(JsonNumbers(rows[0], "uplink_theory_bytes_up")[0], 3 << 19);
  EXPECT_EQ(JsonNumbers(rows[1], "uplink_theory_bytes_up")[0], 1 << 20);
  EXPECT_EQ(JsonNumbers(rows[2], "uplink_theory_bytes_up")[0], 2 << 20);
  // Rows split the counters where each arrives, so only their sum is exact:
  // the payload, plus headers and the control traffic, a few percent.
  EXPECT_GE(counted, theory);
  EXPECT_LE(counted, theory * 1.06);
  std::smatch cluster;
  const std::string err = testbed.Stderr();
  ASSERT_TRUE(std::regex_search(err, cluster, std::regex("emulated cluster (tb[0-9]+):"))) << err;
  EXPECT_FALSE(AnyNamespaceOf(cluster[1].str()));
  std::filesystem::remove_all(dir);
}

// nccl-tests' split on the racks: div:2 puts a ring in each rack, mod:2 a
// ring of ranks from both. Each group's row is exact; inside racks nothing
// crosses, across them each group's row says what it sends up its uplinks,
// and the uplinks counted it (every group's row carries all groups' count).
TEST_F(NetnsRacksTest, GroupsOfASplitRunExactInsideAndAcrossTheRacks) {
  const std::string dir = TempDir("netns-split");
  for (const std::string split : {"div:2", "mod:2"}) {
    SCOPED_TRACE(split);
    TestbedProcess testbed(TESTBED_CLI_PATH,
                           {"local", "--network", "netns", "--link-rate", "1gbit", "--workers",
                            "4", "--racks", "2", "--oversubscription", "2", "--algorithms",
                            "ring", "--sizes", "1MiB", "--iters", "2", "--warmup", "1",
                            "--split", split, "--format", "json"},
                           dir);
    const auto status = testbed.Wait(std::chrono::minutes(3));
    ASSERT_TRUE(status.has_value()) << "testbed local did not finish\n" << testbed.Stderr();
    ASSERT_EQ(*status, 0) << testbed.Stderr();
    const std::vector<std::string> rows = Lines(testbed.Stdout());
    ASSERT_EQ(rows.size(), 2u) << testbed.Stdout();
    double theory = 0;
    for (const std::string& row : rows) {
      SCOPED_TRACE(row);
      EXPECT_EQ(JsonField(row, "wrong"), "0");
      EXPECT_EQ(JsonField(row, "workers"), "2");
      EXPECT_EQ(JsonField(row, "payload_bytes_total"), JsonField(row, "theory_bytes_total"));
      const std::vector<double> up = JsonNumbers(row, "uplink_theory_bytes_up");
      ASSERT_EQ(up.size(), 2u);
      // A ring of 2 sends M each way: across racks each rank's M goes up.
      EXPECT_EQ(up[0] + up[1], split == "div:2" ? 0 : 2 << 20);
      theory += 3 * (up[0] + up[1]);  // warm-up and timed iterations
    }
    const std::vector<double> wire = JsonNumbers(rows[0], "uplink_wire_bytes_up");
    ASSERT_EQ(wire.size(), 2u);
    EXPECT_EQ(JsonNumbers(rows[1], "uplink_wire_bytes_up"), wire);
    const double counted = wire[0] + wire[1];
    if (split == "div:2") {
      EXPECT_LT(counted, 256 << 10);  // control traffic only
    } else {
      EXPECT_GE(counted, theory);
      EXPECT_LE(counted, theory * 1.06);
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace testbed
