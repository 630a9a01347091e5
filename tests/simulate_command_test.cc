// `testbed simulate` as a user meets it: the rows local would print, marked
// simulated, through the same outputs; and what it refuses, with why.
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "experiments/cli/simulate_command.h"
#include "experiments/results/result_row.h"
#include "proto/spec.h"
#include "tests/process_runner.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using testing::JsonField;
using testing::JsonNumbers;
using testing::ReadFile;
using testing::RunCli;
using testing::TempDir;

std::vector<std::string> Lines(const std::string& text, const std::string& starting) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(starting, 0) == 0) lines.push_back(line);
  }
  return lines;
}

TEST(SimulateCommandTest, PrintsTheRowsARunWouldWithTheModelBesideThemAndMarkedSimulated) {
  const auto [code, out] = RunCli(
      "simulate --link-rate 100mbit -n 4 -a ring,ps --servers 4 -s 16MiB --segment off "
      "--format json");
  ASSERT_EQ(code, 0) << out;
  const std::vector<std::string> rows = Lines(out, "{");
  ASSERT_EQ(rows.size(), 2u) << out;
  for (const std::string& row : rows) {
    EXPECT_EQ(JsonField(row, "transport"), kSimulatedTransport) << row;
    EXPECT_EQ(JsonField(row, "iterations"), "1") << row;
    EXPECT_EQ(JsonField(row, "payload_bytes_total"), JsonField(row, "theory_bytes_total")) << row;
    EXPECT_EQ(JsonField(row, "wrong"), "-1") << row;
  }
  // On one switch, in whole steps (16 MiB would be cut into segments by
  // default, each paying alpha), the ring and BytePS's ps are what the cost model says
  // (tests/simulator_test.cc holds the simulator to it), 2.014 s and 1.678 s,
  // stretched by TCP's headers: a 1514-byte frame carries 1448 payload
  // bytes (kTcpPayloadPerWireByte, allreduce/simulator/simulation.h). The
  // model beside the row is the plain alpha-beta one; alpha, a few hundred
  // microseconds in all here, is not stretched.
  const double wire = 1514.0 / 1448.0;
  EXPECT_EQ(JsonField(rows[0], "algorithm"), "ring");
  EXPECT_NEAR(std::stod(JsonField(rows[0], "time_us_avg")), 2013566 * wire, 20);
  EXPECT_NEAR(std::stod(JsonField(rows[0], "model_time_us")), 2013566, 1);
  EXPECT_EQ(JsonField(rows[1], "algorithm"), "ps");
  EXPECT_NEAR(std::stod(JsonField(rows[1], "time_us_avg")), 1677822 * wire, 20);
  EXPECT_THAT(out, HasSubstr("testbed simulate: N = 4, ring, 16MiB: "));
}

TEST(SimulateCommandTest, ReadsTheFabricAndSweepsNFarBeyondWhatDaemonsCanRun) {
  const auto [code, out] = RunCli(
      "simulate --link-rate 1gbit -n 8,1100 --racks 4 --oversubscription 4 -a ring,hierarchical "
      "-s 1MiB --format json");
  ASSERT_EQ(code, 0) << out;
  const std::vector<std::string> rows = Lines(out, "{");
  ASSERT_EQ(rows.size(), 4u) << out;
  EXPECT_EQ(JsonField(rows[3], "workers"), "1100");
  EXPECT_EQ(JsonField(rows[3], "algorithm"), "hierarchical");
  EXPECT_THAT(JsonField(rows[3], "fabric"), HasSubstr("4 racks"));
  EXPECT_GT(std::stod(JsonField(rows[3], "cross_rack_theory_bytes")), 0);
  // 4:1 uplinks: the packed ring crosses each uplink on every one of its
  // 2(N-1) steps, the hierarchical all-reduce only between its racks' rings.
  EXPECT_LT(std::stod(JsonField(rows[3], "cross_rack_theory_bytes")),
            std::stod(JsonField(rows[2], "cross_rack_theory_bytes")));
  EXPECT_LT(std::stod(JsonField(rows[3], "time_us_avg")),
            std::stod(JsonField(rows[2], "time_us_avg")));
}

TEST(SimulateCommandTest, ALateRankShowsInTheRowAsInARun) {
  const auto [code, out] = RunCli(
      "simulate --link-rate 100mbit -n 4 -a ring -s 1MiB --slow-rank 2=100ms --format json");
  ASSERT_EQ(code, 0) << out;
  const std::vector<std::string> rows = Lines(out, "{");
  ASSERT_EQ(rows.size(), 1u) << out;
  const std::vector<double> ranks = JsonNumbers(rows[0], "rank_time_us_p50");
  ASSERT_EQ(ranks.size(), 4u) << rows[0];
  EXPECT_GT(ranks[0], ranks[2] + 99000) << rows[0];  // the others wait 100 ms for it
}

TEST(SimulateCommandTest, WritesAResultsFileTheReadersTakeAndItsCourseTable) {
  const std::string dir = TempDir("simulate");
  const std::string results = dir + "/sim.jsonl";
  const auto [code, out] =
      RunCli("simulate --link-rate 1gbit -n 2,4 -a ring,tree -s 64KiB,1MiB --out " + results);
  ASSERT_EQ(code, 0) << out;
  absl::StatusOr<std::vector<proto::ResultRow>> rows = ReadResultsFiles({results});
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->size(), 8u);
  const std::string table = ReadFile(dir + "/sim.md");
  EXPECT_THAT(table, HasSubstr("| ring | simulated |"));
  EXPECT_THAT(ReadFile(results), HasSubstr("\"deployment\": \"simulated: flow-level"));
  std::filesystem::remove_all(dir);
}

TEST(SimulateCommandTest, RefusesWhatItCannotSimulateSayingWhy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"-n 4 -s 1MiB", "give --link-rate"},
      {"--network loopback -n 4 -s 1MiB", "loopback"},
      {"--link-rate 1gbit -n 4 -s 1MiB --memory pinned", "host memory only"},
      {"--link-rate 1gbit -n 4 -s 1MiB -a auto", "auto"},
      {"--link-rate 1gbit -n 8193 -s 1MiB", "8192"},
      {"--link-rate 1gbit -n 4 -s 1MiB --alpha -1us", "--alpha"},
      {"--link-rate 1gbit -n 4 -s 1MiB --host-cost fast", "--host-cost"},
  };
  for (const auto& [args, why] : cases) {
    const auto [code, out] = RunCli("simulate " + args);
    EXPECT_NE(code, 0) << args << ": " << out;
    EXPECT_THAT(out, HasSubstr(why)) << args;
  }
}

TEST(SimulateCommandTest, TheDaemonsKeepTheirOwnLimit) {
  const auto [code, out] = RunCli("local -n 2000 -s 1MiB");
  EXPECT_NE(code, 0);
  EXPECT_THAT(out, HasSubstr("1024"));
}

TEST(SimulateCommandTest, TheHostCostSlowsEveryReceive) {
  proto::ExperimentSpec spec;
  spec.set_workers(4);
  spec.set_network(proto::Network::netns);
  spec.set_link_rate_bps(100'000'000);
  spec.add_sizes(1 << 20);
  ApplyDefaults(spec);
  absl::StatusOr<proto::ResultRow> plain = SimulateRow(spec, "ring", 1 << 20);
  spec.set_model_host_ns_per_byte(10);
  absl::StatusOr<proto::ResultRow> costly = SimulateRow(spec, "ring", 1 << 20);
  ASSERT_TRUE(plain.ok() && costly.ok());
  // 6 rounds each receive a quarter MiB: 6 x 262144 x 10 ns more.
  EXPECT_NEAR(costly->time_us_avg() - plain->time_us_avg(), 6 * 262144 * 10e-3, 1);
}

}  // namespace
}  // namespace testbed
