// The training table (experiments/results/training_table.h, `testbed report`
// on `testbed train --out` rows): runs timed by their steady interval, grouped
// by link, model and N, the link model's time from the closed forms, the
// fastest scheme named with its lead.
#include <gtest/gtest.h>

#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/cli/report_command.h"
#include "experiments/results/training_table.h"

namespace testbed {
namespace {

constexpr std::int64_t kParameters = 1'000'000;  // a 4 MB gradient

proto::TrainingRow Header(const std::string& scheme, const std::string& sync, int workers) {
  proto::TrainingRow row;
  row.set_sync(sync);
  row.set_scheme(scheme);
  row.set_model("large");
  row.add_layer_sizes(784);
  row.add_layer_sizes(10);
  row.set_workers(workers);
  row.set_parameters(kParameters);
  row.set_dense_gradient_bytes(4 * kParameters);
  row.set_network("netns");
  row.set_link_rate("100mbit");
  row.set_compress("none");
  return row;
}

// Two progress intervals (the first one slow: the connections' set-up) and
// the run row, as `testbed train` writes them.
std::vector<proto::TrainingRow> RunRows(proto::TrainingRow header, double steady_step_seconds) {
  std::vector<proto::TrainingRow> rows;
  for (int step : {10, 20}) {
    proto::TrainingRow progress = header;
    progress.set_kind(proto::TrainingRow::PROGRESS);
    progress.set_step(step);
    progress.set_step_seconds(step == 10 ? 100 * steady_step_seconds : steady_step_seconds);
    progress.set_compute_seconds(0.010);
    progress.set_communication_seconds(progress.step_seconds() - 0.010);
    progress.set_payload_bytes(123456);
    rows.push_back(progress);
  }
  proto::TrainingRow run = header;
  run.set_kind(proto::TrainingRow::RUN);
  run.set_step(20);
  run.set_step_seconds(50 * steady_step_seconds);
  rows.push_back(run);
  return rows;
}

std::string Table(const std::vector<std::vector<proto::TrainingRow>>& runs) {
  std::vector<proto::TrainingRow> rows;
  for (const auto& run : runs) rows.insert(rows.end(), run.begin(), run.end());
  std::ostringstream out;
  const absl::Status st = PrintTrainingTable(rows, out);
  EXPECT_TRUE(st.ok()) << st;
  return out.str();
}

TEST(TrainingTableTest, TimesEachRunByItsSteadyIntervalAndNamesTheFastest) {
  const std::string table =
      Table({RunRows(Header("ring", "ring", 4), 0.700), RunRows(Header("ps-S1", "ps", 4), 1.400)});
  EXPECT_NE(table.find("| 100mbit | large (784-10) | ring, 700 ms (2.00× ahead of ps-S1) |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("## 100mbit, large (784-10), N = 4"), std::string::npos) << table;
  EXPECT_NE(table.find("timed over steps 11–20"), std::string::npos) << table;
  EXPECT_NE(table.find("| ps-S1 | 1400 ms | 10.0 ms | 1390 ms | 0.0 ms | 120.6 KiB |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| 2.00× |"), std::string::npos) << table;
}

// Ring at N = 4: every link carries 2(N-1)/N M = 6 MB each way, 480 ms at
// 100 Mbit/s; one ps shard's link carries N M = 16 MB in and out at once
// (plus the first chunks, which nothing overlaps), fp16 halves the ring's.
TEST(TrainingTableTest, LinkModelIsTheClosedFormOnTheRunsLink) {
  proto::TrainingRow fp16 = Header("ring+fp16", "ring", 4);
  fp16.set_compress("fp16");
  proto::TrainingRow topk = Header("ring+topk", "ring", 4);
  topk.set_compress("topk:0.01");
  proto::TrainingRow ps = Header("ps-S1", "ps", 4);
  ps.set_servers(1);
  const std::string table =
      Table({RunRows(Header("ring", "ring", 4), 0.5), RunRows(fp16, 0.3), RunRows(topk, 0.2), RunRows(ps, 2)});
  EXPECT_NE(table.find("| ring | 500 ms | 10.0 ms | 490 ms | 0.0 ms | 120.6 KiB | 480 ms |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| ring+fp16 | 300 ms | 10.0 ms | 290 ms | 0.0 ms | 120.6 KiB | 240 ms |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| ring+topk | 200 ms | 10.0 ms | 190 ms | 0.0 ms | 120.6 KiB | – |"),
            std::string::npos)
      << table;
  // 16 MB + 4 first chunks of 1 MiB: 1616 ms.
  EXPECT_NE(table.find("| ps-S1 | 2000 ms | 10.0 ms | 1990 ms | 0.0 ms | 120.6 KiB | 1616 ms |"),
            std::string::npos)
      << table;
}

TEST(TrainingTableTest, BucketsAreSummedBucketByBucket) {
  proto::TrainingRow bucketed = Header("ring+bucket", "ring", 4);
  bucketed.set_bucket_bytes(1'000'000);  // four buckets of 1 MB: the same bandwidth term
  const std::string table = Table({RunRows(bucketed, 0.5)});
  EXPECT_NE(table.find("| ring+bucket | 500 ms | 10.0 ms | 490 ms | 0.0 ms | 120.6 KiB | 480 ms |"),
            std::string::npos)
      << table;
}

TEST(TrainingTableTest, GroupsByLinkModelAndNAndALaterRunReplacesAnEarlierOne) {
  proto::TrainingRow gigabit = Header("ring", "ring", 4);
  gigabit.set_link_rate("1gbit");
  const std::string table = Table({RunRows(Header("ring", "ring", 2), 0.9),
                                   RunRows(Header("ring", "ring", 4), 0.9), RunRows(gigabit, 0.1),
                                   RunRows(Header("ring", "ring", 2), 0.3)});
  EXPECT_NE(table.find("## 100mbit, large (784-10), N = 2"), std::string::npos) << table;
  EXPECT_NE(table.find("## 100mbit, large (784-10), N = 4"), std::string::npos) << table;
  EXPECT_NE(table.find("## 1gbit, large (784-10), N = 4"), std::string::npos) << table;
  EXPECT_EQ(table.find("| ring | 900 ms |"), table.rfind("| ring | 900 ms |")) << table;
  EXPECT_NE(table.find("| ring | 300 ms |"), std::string::npos) << table;
  EXPECT_NE(table.find("| 100mbit | large (784-10) | ring, 300 ms | ring, 900 ms |\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| 1gbit | large (784-10) | – | ring, 100 ms |\n"), std::string::npos)
      << table;
}

TEST(TrainingTableTest, NoRunRowsIsAnError) {
  std::ostringstream out;
  EXPECT_EQ(PrintTrainingTable({}, out).code(), absl::StatusCode::kNotFound);
}

std::string Json(const proto::TrainingRow& row) {
  std::string line;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(row, &line).ok());
  return line;
}

TEST(TrainingTableTest, ReadsTrainingRowsAndSkipsExperimentRecords) {
  const std::vector<proto::TrainingRow> run = RunRows(Header("ring", "ring", 2), 0.1);
  std::stringstream in;
  in << R"({"record":"result","algorithm":"ring","workers":2,"bytes":"4"})" << "\n\n";
  for (const proto::TrainingRow& row : run) in << Json(row) << "\n";
  const absl::StatusOr<std::vector<proto::TrainingRow>> rows = ReadTrainingRows(in);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[2].kind(), proto::TrainingRow::RUN);
  EXPECT_EQ((*rows)[0].scheme(), "ring");

  std::stringstream broken(Json(run[0]) + "\n{\"kind\": \"RUN\", \"workers\": \"many\"}\n");
  const auto failed = ReadTrainingRows(broken);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message().substr(0, 8), "line 2: ") << failed.status();
}

TEST(TrainingTableTest, TestbedReportPrintsTheTrainingTableOfATrainingFile) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("training_table_test_" + std::to_string(getpid()));
  {
    std::ofstream out(file);
    for (const proto::TrainingRow& row : RunRows(Header("ring", "ring", 2), 0.1)) {
      out << Json(row) << "\n";
    }
  }
  std::ostringstream out, err;
  EXPECT_EQ(RunReport({.files = {file.string()}, .out = ""}, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("# Training step time per synchronisation scheme"), std::string::npos)
      << out.str();
  EXPECT_EQ(out.str().find("# Traffic and time per algorithm"), std::string::npos) << out.str();

  { std::ofstream empty(file, std::ios::trunc); }
  std::ostringstream none_out, none_err;
  EXPECT_EQ(RunReport({.files = {file.string()}, .out = ""}, none_out, none_err), 1);
  EXPECT_NE(none_err.str().find("no result records and no training rows in " + file.string()),
            std::string::npos)
      << none_err.str();
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace testbed
