// ResultRow is the one definition of a result: every field is a column, a
// row written to a results file reads back equal through protobuf's JSON
// parser, the reference results in the repository still read, and readers and
// writers fail clearly on input or output that is not a results file.
#include <gtest/gtest.h>

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "experiments/results/result_row.h"
#include "experiments/results/results_output.h"

namespace testbed {
namespace {

proto::ResultRow FullRow() {
  proto::ResultRow row;
  row.set_algorithm("ps");
  row.set_workers(4);
  row.set_bytes(1 << 20);
  row.set_iterations(5);
  row.set_time_us_avg(1234.5);
  row.set_time_us_min(1000.25);
  row.set_time_us_max(1500.125);
  row.set_algbw_gbps(0.85);
  row.set_busbw_gbps(1.275);
  row.set_payload_bytes_total(8 << 20);
  row.set_theory_bytes_total(8 << 20);
  row.set_wrong(-1);
  row.set_transport("grpc:tcp/eth0");
  row.set_dtype("float64");
  row.set_rounds(2);
  row.set_max_rank_bytes(4 << 20);
  row.set_servers(2);
  row.add_shard_payload_bytes(4 << 20);
  row.add_shard_payload_bytes(4 << 20);
  row.add_shard_theory_bytes(4 << 20);
  row.add_shard_theory_bytes(4 << 20);
  for (int r = 0; r < 4; ++r) {
    row.add_wire_bytes_sent(1000 + r);
    row.add_wire_bytes_received(2000 + r);
  }
  row.set_wire_bytes_sent_total(4006);
  row.set_wire_bytes_received_total(8006);
  row.set_model_time_us(1200);
  row.set_time_us_p50(1210.5);
  row.set_time_us_p99(1490);
  row.set_segment_bytes(1 << 18);
  return row;
}

TEST(ResultRowTest, EveryFieldOfTheProtoIsAColumnInFieldOrder) {
  const auto* descriptor = proto::ResultRow::descriptor();
  const std::vector<std::string> columns = ResultColumns();
  ASSERT_EQ(static_cast<int>(columns.size()), descriptor->field_count());
  for (std::size_t i = 0; i < columns.size(); ++i) {
    EXPECT_EQ(columns[i], descriptor->FindFieldByNumber(static_cast<int>(i) + 1)->name());
  }
  EXPECT_EQ(ResultCells(FullRow()).size(), columns.size());
}

TEST(ResultRowTest, AnUnsetOptionalFieldIsAnEmptyCell) {
  proto::ResultRow row = FullRow();
  row.clear_model_time_us();
  const std::vector<Cell> cells = ResultCells(row);
  const std::vector<std::string> columns = ResultColumns();
  const auto model = static_cast<std::size_t>(
      std::find(columns.begin(), columns.end(), "model_time_us") - columns.begin());
  ASSERT_LT(model, columns.size());
  EXPECT_EQ(std::get<std::string>(cells[model]), "");
  EXPECT_EQ(std::get<double>(ResultCells(FullRow())[model]), 1200);
}

// Found by tests/fuzz/result_rows_fuzzer: an unset optional field was written
// as "" and a non-finite double as nan, and the reader refused both lines.
TEST(ResultRowTest, AWrittenRowWithUnsetAndNonFiniteFieldsReadsBack) {
  proto::ResultRow row = FullRow();
  row.clear_model_time_us();
  row.set_time_us_avg(std::numeric_limits<double>::infinity());
  std::istringstream in(ResultRecordJson(row) + "\n");
  const auto rows = ReadResultRows(in);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals((*rows)[0], row))
      << (*rows)[0].DebugString();
  EXPECT_EQ(ResultRecordJson(row).find("model_time_us"), std::string::npos);
}

TEST(ResultRowTest, AWrittenRowReadsBackEqual) {
  const proto::ResultRow row = FullRow();
  std::istringstream in("{\"record\": \"experiment\", \"spec\": {\"workers\": 4}}\n\n" +
                        ResultRecordJson(row) + "\n");
  const auto rows = ReadResultRows(in);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals((*rows)[0], row))
      << (*rows)[0].DebugString();
  // Numbers stay numbers for scripts: bytes is not quoted as proto3 JSON would.
  EXPECT_NE(ResultRecordJson(row).find("\"bytes\": 1048576, "), std::string::npos);
}

TEST(ResultRowTest, FieldsFromANewerBuildAreIgnored) {
  std::istringstream in(
      R"({"record": "result", "algorithm": "ring", "workers": 2, "bytes": 8, )"
      R"("time_us_avg": 3.5, "p99_us": 9, "tuner": {"model": "fit"}})"
      "\n");
  const auto rows = ReadResultRows(in);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].time_us_avg(), 3.5);
}

TEST(ResultRowTest, BadLinesAreRefusedWithTheirNumber) {
  for (const char* bad : {"{\"record\": \"result\", \"algorithm\": \"ring\"}",  // no workers
                          "{\"record\": \"result\", \"workers\": 2}",          // no algorithm
                          "{\"record\": \"result\", \"algorithm\": 5}", "{", "[1]",
                          "{\"record\": \"result\", \"algorithm\": \"ring\", \"workers\": 2, "
                          "\"bytes\": \"lots\"}"}) {
    std::istringstream in(std::string("\n") + bad + "\n");
    const auto rows = ReadResultRows(in);
    ASSERT_FALSE(rows.ok()) << bad;
    EXPECT_NE(rows.status().message().find("line 2"), std::string::npos) << rows.status();
  }
}

// A row's counts are held to common/limits.h as the file is read: a results
// file whose ring row says 100,000 workers kept a fit computing for hours.
TEST(ResultRowTest, RowsOverTheLimitsAreRefusedNamingLineFieldValueAndLimit) {
  const std::string head = "{\"record\": \"result\", \"algorithm\": \"ring\", ";
  for (const auto& [fields, message] : std::vector<std::pair<std::string, std::string>>{
           {"\"workers\": 100000, \"bytes\": 4096}",
            "line 2: workers 100000 is over the limit of 8192 (common/limits.h)"},
           {"\"workers\": 2, \"servers\": 65, \"bytes\": 4096}",
            "line 2: servers 65 is over the limit of 64 (common/limits.h)"},
           {"\"workers\": 2, \"bytes\": 4294967297}",
            "line 2: bytes 4294967297 is over the limit of 4294967296 (common/limits.h)"},
           {"\"workers\": 2, \"bytes\": 8, \"iterations\": 1000001}",
            "line 2: iterations 1000001 is over the limit of 1000000 (common/limits.h)"},
           {"\"workers\": 2, \"bytes\": 8, \"shard_payload_bytes\": [" +
                absl::StrJoin(std::vector<int>(65, 1), ",") + "]}",
            "line 2: shard_payload_bytes's length 65 is over the limit of 64 (common/limits.h)"},
       }) {
    std::istringstream in("\n" + head + fields + "\n");
    const auto rows = ReadResultRows(in);
    ASSERT_FALSE(rows.ok()) << fields;
    EXPECT_EQ(rows.status().message(), message);
  }
  std::istringstream at_limits(head + "\"workers\": 1024, \"servers\": 64, \"bytes\": 4096}\n");
  EXPECT_TRUE(ReadResultRows(at_limits).ok());
}

// Rows a daemon run fits to (--tuning, testbed fit) stop at the daemons'
// limit: a simulated row of 8,192 ranks reads in a report, not in a fit.
TEST(ResultRowTest, RowsForAFitStopAtTheDaemonsWorkerLimit) {
  const std::string simulated =
      "{\"record\": \"result\", \"algorithm\": \"ring\", \"workers\": 8192, \"bytes\": 4096}\n";
  std::istringstream for_report(simulated);
  EXPECT_TRUE(ReadResultRows(for_report).ok());
  std::istringstream for_fit(simulated);
  const auto rows = ReadResultRows(for_fit, SpecReader::kCli);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().message(),
            "line 1: workers 8192 is over the limit of 1024 (common/limits.h)");
}

TEST(ResultRowTest, ALineWithoutEndIsRefusedNotBuffered) {
  std::istringstream in(std::string(kMaxResultsLineBytes + 10, '0'));
  const auto rows = ReadResultRows(in);
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().message().find("longer than"), std::string::npos) << rows.status();
  // A device that never ends is not read at all.
  const auto device = ReadResultsFiles({"/dev/zero"});
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.status().message().find("not a regular file"), std::string::npos);
}

TEST(ResultRowTest, TheReferenceResultsStillRead) {
  const std::string path = std::string(TESTBED_SOURCE_DIR) +
                           "/experiments/reference/traffic_tradeoffs.jsonl";
  std::ifstream in(path);
  int result_lines = 0;
  for (std::string line; std::getline(in, line);) {
    result_lines += line.find("\"record\": \"result\"") != std::string::npos;
  }
  ASSERT_GT(result_lines, 0);
  const auto rows = ReadResultsFiles({path});
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(static_cast<int>(rows->size()), result_lines);
  for (const proto::ResultRow& row : *rows) {
    EXPECT_FALSE(row.algorithm().empty());
    EXPECT_GT(row.time_us_avg(), 0);
    EXPECT_EQ(row.payload_bytes_total(), row.theory_bytes_total()) << row.DebugString();
    EXPECT_GT(row.theory_bytes_total(), 0u);
  }
}

// The one estimate behind fit, the course table and model_time_us.
TEST(ResultRowTest, EstimateRowReadsTheRowsAlgorithmSizeShardsAndDtype) {
  const LinkModel link{1e-6, 1e-9};
  proto::ResultRow row = FullRow();  // ps, N = 4, 1 MiB, float64, S = 2
  const auto estimate = EstimateRow(row, link);
  ASSERT_TRUE(estimate.ok()) << estimate.status();
  const CostEstimate direct = EstimateParameterServer(4, 2, 1 << 20, 8, link);
  EXPECT_EQ(estimate->bottleneck_bytes, direct.bottleneck_bytes);
  row.set_servers(0);  // no shards recorded: one
  EXPECT_EQ(EstimateRow(row, link)->bottleneck_bytes,
            EstimateParameterServer(4, 1, 1 << 20, 8, link).bottleneck_bytes);
  row.clear_dtype();  // absent: float32
  EXPECT_EQ(EstimateRow(row, link)->bottleneck_bytes,
            EstimateParameterServer(4, 1, 1 << 20, 4, link).bottleneck_bytes);
  row.set_dtype("bfloat16");
  EXPECT_NE(EstimateRow(row, link).status().message().find("unknown dtype 'bfloat16'"),
            std::string::npos);
  row.set_dtype("float32");
  row.set_algorithm("hypercube");
  EXPECT_FALSE(EstimateRow(row, link).ok());
}

TEST(ResultsFileTest, AFullDiskFailsAtOnceNamingThePathAndTheReason) {
  ResultsFile file;
  const absl::Status opened = file.Open("/dev/full", proto::ExperimentSpec(), "test");
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.message().find("/dev/full"), std::string::npos) << opened;
  EXPECT_NE(opened.message().find("No space left on device"), std::string::npos) << opened;
}

}  // namespace
}  // namespace testbed
