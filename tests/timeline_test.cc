// Timelines of simulated runs (experiments/results/timeline.h): every rank's
// spans are back to back and add up to its time, the slowest rank's to the
// row's; the bytes in the spans are the rank's payload; the file is trace
// JSON of the shape Perfetto reads; and too many ranks are refused.
#include <algorithm>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "experiments/cli/simulate_command.h"
#include "experiments/results/row_timeline.h"
#include "experiments/results/timeline.h"
#include "proto/spec.h"
#include "tests/process_runner.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using testing::ReadFile;
using testing::RunCli;
using testing::TempDir;

// 8 workers in 2 racks behind 4:1 uplinks, rank 5 starting 30 ms late.
proto::ExperimentSpec RacksWithALateRank() {
  proto::ExperimentSpec spec;
  spec.set_workers(8);
  spec.set_network(proto::Network::netns);
  spec.set_link_rate_bps(100'000'000);
  spec.set_servers(2);
  ApplyDefaults(spec);
  spec.mutable_fabric()->set_racks(2);
  spec.mutable_fabric()->set_oversubscription(4);
  proto::SlowRank* late = spec.mutable_fabric()->add_slow_ranks();
  late->set_worker(5);
  late->set_delay_us(30'000);
  spec.set_record_rounds(true);
  return spec;
}

double Duration(const std::vector<TimelineSpan>& spans) {
  double sum = 0;
  for (const TimelineSpan& span : spans) sum += span.end_us - span.start_us;
  return sum;
}

TEST(TimelineTest, EachRanksSpansAreBackToBackAndTheSlowestRankAddsUpToTheRow) {
  const proto::ExperimentSpec spec = RacksWithALateRank();
  for (const char* algorithm : {"ring", "tree", "hierarchical", "naive", "ps"}) {
    absl::StatusOr<proto::ResultRow> row = SimulateRow(spec, algorithm, 4 << 20);
    ASSERT_TRUE(row.ok()) << row.status();
    const TimelineRow timeline = TimelineOfRow(spec, *row);
    ASSERT_EQ(timeline.ranks.size(), 8u) << algorithm;
    ASSERT_GE(timeline.slowest_rank, 0) << algorithm;
    // Round ends are whole microseconds.
    EXPECT_NEAR(Duration(timeline.ranks[static_cast<std::size_t>(timeline.slowest_rank)]),
                row->time_us_max(), 0.5)
        << algorithm;
    std::int64_t sent = 0;
    std::int64_t received = 0;
    for (std::size_t r = 0; r < timeline.ranks.size(); ++r) {
      const std::vector<TimelineSpan>& spans = timeline.ranks[r];
      ASSERT_FALSE(spans.empty()) << algorithm << " rank " << r;
      EXPECT_LE(Duration(spans), row->time_us_max() + 0.5) << algorithm << " rank " << r;
      for (std::size_t i = 1; i < spans.size(); ++i) {
        EXPECT_DOUBLE_EQ(spans[i].start_us, spans[i - 1].end_us) << algorithm << " rank " << r;
      }
      for (const TimelineSpan& span : spans) {
        sent += span.bytes_sent;
        received += span.bytes_received;
      }
    }
    // A ps row's payload counts the pulls too, which the servers send.
    const std::int64_t moved = std::string(algorithm) == "ps" ? sent + received : sent;
    EXPECT_EQ(moved, static_cast<std::int64_t>(row->payload_bytes_total())) << algorithm;
    // The late rank's first span starts when it does.
    EXPECT_NEAR(timeline.ranks[5].front().start_us, 30'000, 0.01) << algorithm;
  }
}

TEST(TimelineTest, ASegmentedRowsSpansAddUpToItsTimeToo) {
  proto::ExperimentSpec spec = RacksWithALateRank();
  spec.mutable_segment()->set_bytes(256 << 10);
  for (const char* algorithm : {"tree", "ring", "hierarchical"}) {
    absl::StatusOr<proto::ResultRow> row = SimulateRow(spec, algorithm, 4 << 20);
    ASSERT_TRUE(row.ok()) << row.status();
    EXPECT_EQ(row->segment_bytes(), 256u << 10);
    const TimelineRow timeline = TimelineOfRow(spec, *row);
    ASSERT_GE(timeline.slowest_rank, 0) << algorithm;
    EXPECT_NEAR(Duration(timeline.ranks[static_cast<std::size_t>(timeline.slowest_rank)]),
                row->time_us_max(), 0.5)
        << algorithm;
  }
}

TEST(TimelineTest, ARingsSpansAreItsRoundsWithTheirPeerAndBytes) {
  proto::ExperimentSpec spec = RacksWithALateRank();
  spec.mutable_fabric()->clear_slow_ranks();
  absl::StatusOr<proto::ResultRow> row = SimulateRow(spec, "ring", 8 << 20);
  ASSERT_TRUE(row.ok()) << row.status();
  const TimelineRow timeline = TimelineOfRow(spec, *row);
  const std::vector<TimelineSpan>& rank2 = timeline.ranks[2];
  ASSERT_EQ(rank2.size(), 14u);  // 2(N-1) rounds
  EXPECT_EQ(rank2[0].name, "round 0");
  EXPECT_EQ(rank2[0].peer, 3);
  EXPECT_EQ(rank2[0].sends, 1);
  EXPECT_EQ(rank2[0].bytes_sent, (8 << 20) / 8);
  EXPECT_EQ(rank2[0].bytes_received, (8 << 20) / 8);
}

TEST(TimelineTest, TheFileIsTraceEventJsonWithATrackPerRankAndTheSlowestMarked) {
  const std::string dir = TempDir("timeline");
  const std::string path = dir + "/t.json";
  const auto [code, out] = RunCli(
      "simulate --link-rate 100mbit -n 4 --slow-rank 1=20ms -a ring,ps -s 1MiB --timeline " + path);
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("timeline (2 rows) written to " + path));
  google::protobuf::Struct trace;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ReadFile(path), &trace).ok());
  const auto& events = trace.fields().at("traceEvents").list_value().values();
  int spans = 0;
  int slowest_spans = 0;
  std::vector<std::string> names;
  for (const auto& value : events) {
    const auto& event = value.struct_value().fields();
    const std::string ph = event.at("ph").string_value();
    ASSERT_TRUE(ph == "M" || ph == "X") << ph;
    const auto& args = event.at("args").struct_value().fields();
    if (ph == "M") {
      names.push_back(args.at("name").string_value());
      continue;
    }
    ++spans;
    for (const char* field : {"pid", "tid", "ts", "dur"}) {
      EXPECT_EQ(event.count(field), 1u) << field;
    }
    EXPECT_GE(event.at("dur").number_value(), 0);
    EXPECT_EQ(args.count("bytes_sent"), 1u);
    if (args.count("slowest") == 1) ++slowest_spans;
  }
  // ring: 4 ranks of 6 rounds; ps: 4 workers of 2 phases.
  EXPECT_EQ(spans, 4 * 6 + 4 * 2);
  EXPECT_EQ(slowest_spans, 6 + 2);
  EXPECT_THAT(names, ::testing::Contains("ring 1MiB, N = 4 (simulated)"));
  // One slowest rank per row, and not the late one: it waits for nobody
  // (tests/integration/stragglers_test.cc says the same of measured runs).
  EXPECT_EQ(std::count_if(names.begin(), names.end(),
                          [](const std::string& n) { return n.ends_with("(slowest)"); }),
            2);
  EXPECT_THAT(names, ::testing::Not(::testing::Contains("rank 1 (slowest)")));
}

TEST(TimelineTest, MoreRanksThanATraceHoldsAreRefusedBeforeAnythingRuns) {
  const std::string dir = TempDir("timeline-big");
  const auto [code, out] = RunCli("simulate --link-rate 1gbit -n 8,300 -a ring -s 1MiB --timeline " +
                                  dir + "/t.json");
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("records up to 256 workers, not 300"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("N = 8")));
}

TEST(TimelineTest, NamesAreEscaped) {
  TimelineRow row;
  row.title = "a \"quoted\" \\ name";
  row.ranks.push_back({{0, 1, "round 0"}});
  google::protobuf::Struct trace;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(TimelineJson({row}, "x\ny"), &trace).ok());
}

}  // namespace
}  // namespace testbed
