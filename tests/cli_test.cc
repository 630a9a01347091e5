// The `testbed` command line: size parsing, output formats, and the binary
// itself answering bad input with a clear message and a non-zero exit.
#include <gtest/gtest.h>

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/process_runner.h"
#include "common/byte_size.h"
#include "common/link_units.h"
#include "experiments/results/table.h"
#include "experiments/cli/trace_command.h"
#include "experiments/cli/traffic_command.h"
#include "experiments/cli/train_sweep.h"
#include "proto/training.pb.h"

namespace testbed {
namespace {

TEST(ByteSizeTest, AcceptsPlainBytesAndSuffixes) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096);
  EXPECT_EQ(*ParseByteSize("100B"), 100);
  EXPECT_EQ(*ParseByteSize("64KiB"), 64 << 10);
  EXPECT_EQ(*ParseByteSize("64MiB"), 64 << 20);
  EXPECT_EQ(*ParseByteSize("2GiB"), std::int64_t{2} << 30);
  EXPECT_EQ(*ParseByteSize("16M"), 16 << 20);
  EXPECT_EQ(*ParseByteSize("1MB"), 1000000);
  EXPECT_EQ(*ParseByteSize(" 8 KiB "), 8192);
}

TEST(ByteSizeTest, RejectsMalformedSizes) {
  for (const char* bad : {"", "MiB", "-4", "1.5MiB", "12XB", "64 mib", "9999999999999GiB", "0x10"}) {
    EXPECT_FALSE(ParseByteSize(bad).ok()) << bad;
  }
}

// Numbers past what their type holds are refused like any other bad input,
// never thrown and never turned into infinity.
TEST(ByteSizeTest, RefusesNumbersOutOfRange) {
  for (const char* bad : {"99999999999999999999", "9223372036854775808", "9999999999TiB"}) {
    const auto size = ParseByteSize(bad);
    ASSERT_FALSE(size.ok()) << bad;
    EXPECT_NE(size.status().message().find(bad), std::string::npos) << size.status();
  }
  const std::string huge = "1" + std::string(308, '0');  // 1e308: finite, times 1e9 is not
  for (const std::string& bad : {huge + "gbit", huge + "0bit", huge + "kbit"}) {
    const auto rate = ParseLinkRate(bad);
    ASSERT_FALSE(rate.ok()) << bad << " gave " << *rate;
    EXPECT_NE(rate.status().message().find(bad), std::string::npos) << rate.status();
  }
  EXPECT_FALSE(ParseDuration(huge + "0s").ok());
}

TEST(ByteSizeTest, FormatsTheShortestExactSpelling) {
  EXPECT_EQ(FormatByteSize(65536), "64KiB");
  EXPECT_EQ(FormatByteSize(1000), "1000B");
  EXPECT_EQ(FormatByteSize(std::int64_t{3} << 30), "3GiB");
}

TEST(TableTest, JsonLinesKeepNumbersAsNumbers) {
  Table t({"algorithm", "bytes", "ratio"});
  t.AddRow({std::string("ring \"fast\""), std::int64_t{42}, 0.5});
  std::ostringstream out;
  t.Print(OutputFormat::kJson, out);
  EXPECT_EQ(out.str(), "{\"algorithm\": \"ring \\\"fast\\\"\", \"bytes\": 42, \"ratio\": 0.5}\n");
}

TEST(TableTest, CsvQuotesFieldsThatNeedIt) {
  Table t({"a", "b"});
  t.AddRow({std::string("x,y"), std::int64_t{1}});
  std::ostringstream out;
  t.Print(OutputFormat::kCsv, out);
  EXPECT_EQ(out.str(), "a,b\n\"x,y\",1\n");
}

TEST(TableTest, SelectKeepsTheNamedColumnsInOrder) {
  Table t({"a", "b", "c"});
  t.AddRow({std::int64_t{1}, std::string("x"), 2.5});
  const Table s = t.Select({"c", "missing", "a"});
  EXPECT_EQ(s.columns(), (std::vector<std::string>{"c", "a"}));
  std::ostringstream out;
  s.Print(OutputFormat::kCsv, out);
  EXPECT_EQ(out.str(), "c,a\n2.5,1\n");
}

TEST(TrafficCommandTest, JsonRowsCarryTheMeasuredAndFormulaBytes) {
  TrafficOptions options;
  options.workers = 4;
  options.bytes = "1KiB";
  options.format = OutputFormat::kJson;
  std::ostringstream out, err;
  ASSERT_EQ(RunTraffic(options, out, err), 0) << err.str();
  const std::string text = out.str();
  EXPECT_NE(text.find("{\"algorithm\": \"naive\", \"workers\": 4, \"bytes\": 1024, "
                      "\"total_bytes\": 12288, \"max_rank_bytes\": 3072, \"rounds\": 1, "
                      "\"formula_bytes\": 12288, "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"algorithm\": \"butterfly\", \"workers\": 4, \"bytes\": 1024, "
                      "\"total_bytes\": 8192, "),
            std::string::npos)
      << text;
}

TEST(TrafficCommandTest, RejectsBytesThatAreNotWholeElements) {
  TrafficOptions options;
  options.bytes = "1001";
  std::ostringstream out, err;
  EXPECT_NE(RunTraffic(options, out, err), 0);
  EXPECT_NE(err.str().find("not a whole number of float32"), std::string::npos);
}

TEST(TraceCommandTest, EndsWithEveryRankHoldingEveryContribution) {
  TraceOptions options;
  options.algorithm = "butterfly";
  options.workers = 3;
  options.count = 2;
  std::ostringstream out, err;
  ASSERT_EQ(RunTrace(options, out, err), 0) << err.str();
  const std::string text = out.str();
  EXPECT_NE(text.find("round 0 (fold)"), std::string::npos);
  EXPECT_NE(text.find("rank 0 -> rank 1: elements [0,2); rank 1 adds them into its [0,2)"),
            std::string::npos);
  // After the last round, every rank holds 10^0 + 10^1 + 10^2.
  const std::string last = text.substr(text.find("round 2 (unfold)"));
  EXPECT_NE(last.find("rank  0: 111 111"), std::string::npos) << last;
  EXPECT_NE(last.find("rank  2: 111 111"), std::string::npos) << last;
  EXPECT_NE(text.find("3 rounds (formula 3); 8 elements sent in total"), std::string::npos);
}

TEST(TraceCommandTest, TracesEveryCollective) {
  for (const char* name : {"naive", "ring", "tree", "butterfly", "reduce-scatter", "all-gather",
                           "broadcast", "reduce"}) {
    TraceOptions options;
    options.algorithm = name;
    options.workers = 5;
    options.count = 7;
    options.root = 2;
    std::ostringstream out, err;
    EXPECT_EQ(RunTrace(options, out, err), 0) << name << ": " << err.str();
    EXPECT_NE(out.str().find("round 0"), std::string::npos) << name;
  }
}

using testing::RunCli;

TEST(CliBinaryTest, BadArgumentsGetAClearMessageAndNonZeroExit) {
  struct Case {
    std::string args;
    const char* message;
  };
  for (const Case& c : {
           Case{"trace --algorithm quicksort", "unknown algorithm 'quicksort'"},
           Case{"traffic --algorithms ring,ps", "unknown algorithm 'ps'"},
           Case{"traffic --workers 0", "--workers"},
           Case{"trace --workers -3", "--workers"},
           Case{"traffic --bytes 12XB", "bad size '12XB'"},
           Case{"traffic --bytes 1.5MiB", "bad size"},
           Case{"traffic --format yaml", "--format"},
           Case{"trace --algorithm broadcast --workers 3 --root 3", "not a rank of 3"},
           Case{"", "subcommand"},
           // Out-of-range numbers: refused before any daemon starts, never a
           // throw (an uncaught std::out_of_range exits 134).
           Case{"local --sizes 4KiB:16MiB:x99999999999999999999",
                "bad size step 'x99999999999999999999'"},
           Case{"local --sizes 4KiB:16MiB:x9223372036854775808",
                "bad size step 'x9223372036854775808'"},
           Case{"local --sizes 4KiB:99999999999999999999", "bad size '99999999999999999999'"},
           Case{"run --coordinator 127.0.0.1:1 --sizes 4KiB:16MiB:x1e3", "bad size step 'x1e3'"},
           Case{"local --iters 99999999999999999999", "--iters"},
           Case{"local --timeout 99999999999999999999", "--timeout"},
           Case{"local --link-rate 1" + std::string(308, '0') + "gbit", "bad link rate"},
           Case{"train --sync quicksort", "unknown algorithm 'quicksort'"},
           Case{"train --sync reduce-scatter", "unknown algorithm 'reduce-scatter'"},
           Case{"train --optimizer adagrad", "--optimizer"},
           Case{"train --batch 0", "--batch"},
           Case{"train --hidden 64,0", "--hidden"},
           Case{"train --deployment compose", "--deployment"},
           Case{"train --data-dir /nonexistent", "install Debian's dataset-fashion-mnist"},
       }) {
    const auto [status, output] = RunCli(c.args);
    // An exit with a status, not a crash (an abort reads as 134 or -1).
    EXPECT_TRUE(status > 0 && status < 128) << c.args << ": " << status << "\n" << output;
    EXPECT_NE(output.find(c.message), std::string::npos) << c.args << "\n" << output;
  }
}

// The options parsed into typed values as the command line is read
// (experiments/cli/setting_flags.h, AddParsedOption): a refused value is the
// option's name and the parser's own words in one line, then CLI11's hint,
// and CLI11's exit status for a refused value (105, as its own checks).
TEST(CliBinaryTest, ParsedOptionsRefuseInTheirParsersWords) {
  for (const auto& [args, line] : std::vector<std::pair<std::string, std::string>>{
           {"local --segment 0", "--segment: a segment is off, auto or 1 byte .. 4 GiB, not '0'"},
           {"local --memory disk",
            "--memory: unknown value 'disk' (choose from host, pinned, cuda, fake-device)"},
           {"model --alpha 5 --link-rate 1gbit",
            "--alpha: bad duration '5' (a number and a unit: ns, us, ms, s; e.g. 50us)"},
           {"model --format yaml", "--format: unknown format 'yaml' (table, csv, json)"},
           {"train --compress topk:2", "--compress: bad --compress 'topk:2': RATIO is out of range"},
           {"train --ps-mode ssp:x", "--ps-mode: unknown ps mode 'ssp:x' (choose from sync, async, "
                                     "ssp:K with K >= 0 steps of staleness)"},
       }) {
    const auto [status, output] = RunCli(args);
    EXPECT_EQ(status, 105) << args << "\n" << output;
    EXPECT_EQ(output.rfind(line, 0), 0u) << args << "\n" << output;
    EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 2) << args << "\n" << output;
  }
}

// `testbed train --out`: every line is a TrainingRow that protobuf's own JSON
// parser reads back, progress rows then one run row.
TEST(TrainCommandTest, RowsReadBackAsTrainingRows) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const std::string out = ::testing::TempDir() + "/train_rows.jsonl";
  const auto [status, output] = RunCli(
      "train --workers 2 --sync tree --hidden 16 --batch 8 --steps 20 --report-every 10 --out " +
      out);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("train: epoch"), std::string::npos) << "progress on stderr\n" << output;
  std::ifstream in(out);
  std::vector<proto::TrainingRow> rows;
  for (std::string line; std::getline(in, line);) {
    proto::TrainingRow row;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &row).ok()) << line;
    rows.push_back(row);
  }
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].kind(), proto::TrainingRow::PROGRESS);
  EXPECT_EQ(rows[0].step(), 10u);
  EXPECT_EQ(rows[2].kind(), proto::TrainingRow::RUN);
  EXPECT_EQ(rows[2].sync(), "tree");
  EXPECT_EQ(rows[2].workers(), 2u);
  EXPECT_EQ(rows[2].parameters(), 784 * 16 + 16 + 16 * 10 + 10);
  EXPECT_GT(rows[2].test_accuracy(), 0.1) << "better than chance after 20 steps";
}

// `testbed train -n 1,2`: one run per N, ascending; the N = 2 run's row
// carries its speed-up and scaling efficiency against the N = 1 run.
TEST(TrainCommandTest, ASweepWithOneWorkerReportsScalingEfficiency) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const std::string out = ::testing::TempDir() + "/train_scaling.jsonl";
  const auto [status, output] = RunCli(
      "train --workers 2,1 --sync ring --hidden 16 --batch 8 --steps 10 --report-every 10 --out " +
      out);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("scaling against one worker"), std::string::npos) << output;
  std::ifstream in(out);
  std::vector<proto::TrainingRow> runs;
  for (std::string line; std::getline(in, line);) {
    proto::TrainingRow row;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &row).ok()) << line;
    if (row.kind() == proto::TrainingRow::RUN) runs.push_back(row);
  }
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].workers(), 1u);  // ascending: the yardstick first
  EXPECT_FALSE(runs[0].has_speedup());
  ASSERT_EQ(runs[1].workers(), 2u);
  ASSERT_TRUE(runs[1].has_speedup());
  EXPECT_DOUBLE_EQ(runs[1].speedup(), runs[1].samples_per_second() / runs[0].samples_per_second());
  EXPECT_DOUBLE_EQ(runs[1].scaling_efficiency(), runs[1].speedup() / 2);
}

TEST(TrainCommandTest, ScalingIsSpeedupPerWorker) {
  proto::TrainingRow one, four;
  one.set_workers(1);
  one.set_samples_per_second(1000);
  four.set_workers(4);
  four.set_samples_per_second(3000);
  SetScaling(one, four);
  EXPECT_DOUBLE_EQ(four.speedup(), 3.0);
  EXPECT_DOUBLE_EQ(four.scaling_efficiency(), 0.75);
  proto::TrainingRow no_throughput;
  no_throughput.set_workers(2);
  SetScaling(one, no_throughput);
  EXPECT_FALSE(no_throughput.has_speedup());
}

TEST(CliBinaryTest, HelpExplainsEachSubcommand) {
  const auto [status, output] = RunCli("traffic --help");
  EXPECT_EQ(status, 0);
  EXPECT_NE(output.find("--workers"), std::string::npos);
  EXPECT_NE(output.find("max_rank_bytes"), std::string::npos);
}

}  // namespace
}  // namespace testbed
