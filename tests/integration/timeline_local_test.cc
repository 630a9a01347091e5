// Measured timelines (`testbed local --timeline`, experiments/results/row_timeline.h)
// on real daemons over loopback: each rank's rounds of its last timed
// iteration, back to back, add up to a time the row measured; a rank that
// begins late starts its track late and is not the slowest (it waits for
// nobody); the spans carry the schedule's peers and bytes, and ps its push
// and pull phases. The same shape as a simulated timeline
// (tests/timeline_test.cc), so the two open side by side.
#include <gtest/gtest.h>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/process_runner.h"

namespace testbed {
namespace {

using testing::JsonField;
using testing::Lines;
using testing::ReadFile;
using testing::TempDir;
using testing::TestbedProcess;

struct Span {
  double start_us = 0, end_us = 0;
  std::string name;
  double bytes_sent = 0;
  int peer = -1;
};
struct Process {
  std::string title;
  std::map<int, std::string> track_names;
  std::map<int, std::vector<Span>> tracks;  // by rank, in order
};

std::map<int, Process> ReadTrace(const std::string& path) {
  google::protobuf::Struct trace;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(ReadFile(path), &trace).ok());
  std::map<int, Process> processes;
  for (const auto& value : trace.fields().at("traceEvents").list_value().values()) {
    const auto& event = value.struct_value().fields();
    const int pid = static_cast<int>(event.at("pid").number_value());
    const auto& args = event.at("args").struct_value().fields();
    if (event.at("ph").string_value() == "M") {
      if (event.count("tid") == 0) {
        processes[pid].title = args.at("name").string_value();
      } else {
        processes[pid].track_names[static_cast<int>(event.at("tid").number_value())] =
            args.at("name").string_value();
      }
      continue;
    }
    Span span;
    span.start_us = event.at("ts").number_value();
    span.end_us = span.start_us + event.at("dur").number_value();
    span.name = event.at("name").string_value();
    span.bytes_sent = args.at("bytes_sent").number_value();
    if (args.count("peer") == 1) span.peer = static_cast<int>(args.at("peer").number_value());
    processes[pid].tracks[static_cast<int>(event.at("tid").number_value())].push_back(span);
  }
  return processes;
}

double Duration(const std::vector<Span>& spans) {
  double sum = 0;
  for (const Span& span : spans) sum += span.end_us - span.start_us;
  return sum;
}

TEST(MeasuredTimeline, RanksRoundsAddUpToTheRowsTimeAndTheLateRankStartsLate) {
  const std::string dir = TempDir("measured-timeline");
  const std::string path = dir + "/t.json";
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "3", "--algorithms", "ring,ps", "--sizes", "256KiB",
                          "--iters", "2", "--warmup", "1", "--slow-rank", "1=30ms", "--format",
                          "json", "--timeline", path},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(3));
  ASSERT_TRUE(status.has_value()) << "testbed local did not finish\n" << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  EXPECT_NE(testbed.Stderr().find("timeline (2 rows) written to " + path), std::string::npos)
      << testbed.Stderr();
  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 2u);
  const std::map<int, Process> trace = ReadTrace(path);
  ASSERT_EQ(trace.count(1) + trace.count(2), 2u);
  for (int pid : {1, 2}) {
    const Process& process = trace.at(pid);
    const std::string& row = rows[static_cast<std::size_t>(pid - 1)];
    const bool ps = pid == 2;
    SCOPED_TRACE(process.title);
    EXPECT_EQ(process.title, ps ? "ps 256KiB, N = 3 (grpc)" : "ring 256KiB, N = 3 (ucx:tcp/lo.0)");
    ASSERT_EQ(process.tracks.size(), 3u);
    int slowest = -1;
    for (const auto& [rank, name] : process.track_names) {
      if (name.ends_with("(slowest)")) slowest = rank;
    }
    ASSERT_GE(slowest, 0);
    EXPECT_NE(slowest, 1) << "the late rank waits for nobody";
    double sent = 0;
    for (const auto& [rank, spans] : process.tracks) {
      ASSERT_EQ(spans.size(), ps ? 2u : 4u) << "rank " << rank;  // ring: 2(N-1) rounds
      for (std::size_t i = 1; i < spans.size(); ++i) {
        EXPECT_DOUBLE_EQ(spans[i].start_us, spans[i - 1].end_us) << "rank " << rank;
      }
      for (const Span& span : spans) sent += span.bytes_sent;
      if (!ps) {
        EXPECT_EQ(spans[0].peer, (rank + 1) % 3) << "rank " << rank;
      }
    }
    EXPECT_EQ(process.tracks.at(1).front().start_us, 30'000);
    EXPECT_EQ(process.tracks.at(0).front().start_us, 0);
    if (ps) {
      EXPECT_EQ(process.tracks.at(0)[0].name, "push");
      EXPECT_EQ(process.tracks.at(0)[1].name, "pull");
      EXPECT_EQ(sent, 3.0 * (256 << 10));  // pushed; the row's payload adds the pulls
    } else {
      EXPECT_EQ(sent, std::atof(JsonField(row, "payload_bytes_total").c_str()));
    }
    // The recorded iteration is one of the row's: its slowest rank's time
    // (whole microseconds) lies between the row's fastest and slowest.
    const double slowest_us = Duration(process.tracks.at(slowest));
    EXPECT_GE(slowest_us, std::atof(JsonField(row, "time_us_min").c_str()) - 1);
    EXPECT_LE(slowest_us, std::atof(JsonField(row, "time_us_max").c_str()) + 1);
    // Everyone waited for the late rank.
    EXPECT_GE(slowest_us, 25'000);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace testbed
