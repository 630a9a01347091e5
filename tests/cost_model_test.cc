// The alpha-beta cost model read off the schedules, `testbed model`, and
// `testbed fit`: closed forms reproduced exactly, a hand-computed time, the fit
// recovering the model's own parameters, and the results-file reader.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/process_runner.h"
#include "allreduce/cost_model.h"
#include "experiments/cli/fit_command.h"
#include "experiments/results/result_row.h"
#include "experiments/cli/model_command.h"

namespace testbed {
namespace {

constexpr std::int64_t kMiB = 1 << 20;

std::vector<std::int64_t> Bottlenecks(const char* name, int n, std::int64_t bytes) {
  return RoundBottleneckBytes(*FindCollective(name), n, bytes, 4);
}

// The estimate refuses what it would take hours to build: a ring's schedules
// for N ranks hold about 2 N^2 steps.
TEST(CostModelTest, EstimatesPastTheLimitsAreRefusedBeforeAnyScheduleIsBuilt) {
  const LinkModel link{50e-6, 8e-9};
  const auto many = EstimateAlgorithm("ring", 100000, 1, 1 << 20, 4, link);
  EXPECT_EQ(many.status().message(), "workers 100000 is outside 1..8192 (common/limits.h)");
  const auto shards = EstimateAlgorithm("ps", 4, 65, 1 << 20, 4, link);
  EXPECT_EQ(shards.status().message(), "servers 65 is outside 1..64 (common/limits.h)");
  EXPECT_TRUE(EstimateAlgorithm("ring", 1024, 1, 1 << 20, 4, link).ok());
}

TEST(CostModelTest, RingMovesAQuarterPerRoundForFourRanks) {
  EXPECT_EQ(Bottlenecks("ring", 4, 16 * kMiB), std::vector<std::int64_t>(6, 4 * kMiB));
}

TEST(CostModelTest, NaiveIsOneRoundOfNMinusOneVectors) {
  for (int n : {2, 4, 7}) {
    EXPECT_EQ(Bottlenecks("naive", n, kMiB), std::vector<std::int64_t>{(n - 1) * kMiB}) << n;
  }
}

TEST(CostModelTest, TreeIsTwiceCeilLog2NRoundsOfTheWholeVector) {
  for (const auto& [n, levels] : {std::pair{2, 1}, {4, 2}, {5, 3}, {8, 3}, {9, 4}}) {
    EXPECT_EQ(Bottlenecks("tree", n, kMiB), std::vector<std::int64_t>(2 * levels, kMiB)) << n;
  }
}

TEST(CostModelTest, ButterflyIsLog2NRoundsOfTheWholeVector) {
  EXPECT_EQ(Bottlenecks("butterfly", 8, kMiB), std::vector<std::int64_t>(3, kMiB));
  // Not a power of two: fold and unfold add a round of M each.
  EXPECT_EQ(Bottlenecks("butterfly", 6, kMiB), std::vector<std::int64_t>(4, kMiB));
}

TEST(CostModelTest, RingIsExactWhenTheVectorDoesNotDivide) {
  // 10 elements over 4 ranks: chunks 3,3,2,2; some rank sends a 3-chunk every round.
  EXPECT_EQ(Bottlenecks("ring", 4, 40), std::vector<std::int64_t>(6, 12));
}

TEST(CostModelTest, HandComputedRingTime) {
  const LinkModel link{10e-6, 8.0 / 1e9};  // 10 us, 1 Gbit/s
  const CostEstimate e = EstimateCollective(*FindCollective("ring"), 4, kMiB, 4, link);
  EXPECT_EQ(e.rounds, 6);
  EXPECT_EQ(e.bottleneck_bytes, 6 * 262144);
  // 6 * (10 us + 262144 B * 8 ns/B) = 6 * 2107.152 us.
  EXPECT_NEAR(e.time_s * 1e6, 12642.912, 1e-6);
}

TEST(CostModelTest, ParameterServerIsTwoRoundsThroughTheLargestShard) {
  const LinkModel link{50e-6, 8e-9};
  // Slices of one chunk (512 KiB each): N slices in, then N out.
  const CostEstimate e = EstimateParameterServer(4, 2, kMiB, 4, link);
  EXPECT_EQ(e.round_bottleneck_bytes, (std::vector<std::int64_t>{2 * kMiB, 2 * kMiB}));
  EXPECT_NEAR(e.time_s, 2 * (50e-6 + 8e-9 * 2 * kMiB), 1e-12);
  // 3 floats over 2 shards: the larger slice has 2 of them.
  EXPECT_EQ(EstimateParameterServer(4, 2, 12, 4, link).bottleneck_bytes, 2 * 4 * 8);
}

// Full duplex: beyond one chunk, the pushes and the values share the time, so
// a step costs N first chunks plus N slices, not 2 N slices.
TEST(CostModelTest, ParameterServerOverlapsThePushesWithTheValuesBeyondOneChunk) {
  const LinkModel link{50e-6, 8e-9};
  const CostEstimate e = EstimateParameterServer(4, 1, 64 * kMiB, 4, link);
  EXPECT_EQ(e.rounds, 2);
  EXPECT_EQ(e.round_bottleneck_bytes, (std::vector<std::int64_t>{4 * kMiB, 4 * 64 * kMiB}));
  EXPECT_NEAR(e.time_s, 2 * 50e-6 + 8e-9 * 4 * 65 * kMiB, 1e-12);
  // Float64 chunks are 1 MiB too: 131072 whole elements.
  EXPECT_EQ(EstimateParameterServer(2, 1, 4 * kMiB, 8, link).round_bottleneck_bytes[0], 2 * kMiB);
}

TEST(CostModelTest, FitRecoversAlphaAndBetaFromTheModelItself) {
  const LinkModel truth{37e-6, 8.0 / 2.5e9};
  std::vector<FitPoint> points;
  for (const char* name : {"ring", "tree"}) {
    for (std::int64_t bytes : {4096, 65536, 1 << 20, 16 << 20}) {
      const CostEstimate e = EstimateCollective(*FindCollective(name), 4, bytes, 4, truth);
      points.push_back({e.rounds, e.bottleneck_bytes, e.time_s});
    }
  }
  const auto fit = FitAlphaBeta(points);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->link.alpha_s / truth.alpha_s, 1, 1e-9);
  EXPECT_NEAR(fit->link.beta_s_per_byte / truth.beta_s_per_byte, 1, 1e-9);
  EXPECT_NEAR(fit->r_squared, 1, 1e-12);
  EXPECT_LT(fit->worst_relative_residual, 1e-9);
}

TEST(CostModelTest, FitNeverReturnsANegativeLatency) {
  // Times that grow faster than linearly in bytes: the free optimum has
  // alpha < 0; the fit puts it at 0 and fits beta alone.
  const std::vector<FitPoint> points = {{6, 1 << 20, 5e-3}, {6, 16 << 20, 200e-3}};
  const auto fit = FitAlphaBeta(points);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->link.alpha_s, 0);
  EXPECT_GT(fit->link.beta_s_per_byte, 0);
}

TEST(CostModelTest, FitRefusesASingleSize) {
  EXPECT_FALSE(FitAlphaBeta({{6, 1000, 1e-3}}).ok());
  EXPECT_FALSE(FitAlphaBeta({{6, 1000, 1e-3}, {6, 1000, 2e-3}}).ok());
}

TEST(ModelCommandTest, ParsesDurationsAndRates) {
  EXPECT_DOUBLE_EQ(*ParseDuration("50us"), 50e-6);
  EXPECT_DOUBLE_EQ(*ParseDuration("1.5ms"), 1.5e-3);
  EXPECT_DOUBLE_EQ(*ParseDuration("10ns"), 10e-9);
  EXPECT_DOUBLE_EQ(*ParseDuration("2s"), 2);
  EXPECT_DOUBLE_EQ(*ParseDuration("0"), 0);
  EXPECT_DOUBLE_EQ(*ParseLinkRate("100mbit"), 1e8);
  EXPECT_DOUBLE_EQ(*ParseLinkRate("1gbit"), 1e9);
  EXPECT_DOUBLE_EQ(*ParseLinkRate("10Gbit"), 1e10);
  EXPECT_DOUBLE_EQ(*ParseLinkRate("500kbit"), 5e5);
  EXPECT_DOUBLE_EQ(*ParseLinkRate("1000000000"), 1e9);
  for (const char* bad : {"", "50", "50xs", "us", "-5us", "1e3us"}) {
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
  for (const char* bad : {"", "0", "0gbit", "1gbps", "1GB/s", "fast", "-1gbit"}) {
    EXPECT_FALSE(ParseLinkRate(bad).ok()) << bad;
  }
}

// What the flags store and what rows and messages print back.
TEST(ModelCommandTest, LinkRatesAreWholeBitsPerSecondAndPrintAsTcWritesThem) {
  EXPECT_EQ(*ParseLinkRateBps("1gbit"), 1000000000u);
  EXPECT_EQ(*ParseLinkRateBps("1.5gbit"), 1500000000u);
  EXPECT_FALSE(ParseLinkRateBps("0.5").ok());  // under 1 bit/s would read as unlimited
  EXPECT_FALSE(ParseLinkRateBps("2000000gbit").ok());
  EXPECT_EQ(FormatLinkRate(1000000000), "1gbit");
  EXPECT_EQ(FormatLinkRate(100000000), "100mbit");
  EXPECT_EQ(FormatLinkRate(1500000000), "1500mbit");
  EXPECT_EQ(FormatLinkRate(500000), "500kbit");
  EXPECT_EQ(FormatLinkRate(1234), "1234bit");
  for (const char* text : {"100mbit", "1gbit", "10gbit", "500kbit"}) {
    EXPECT_EQ(FormatLinkRate(*ParseLinkRateBps(text)), text);
  }
}

TEST(ModelCommandTest, JsonRowsForEveryAlgorithm) {
  ModelOptions options;
  options.workers = 4;
  options.bytes = "1MiB";
  options.alpha_us = 10;
  options.link_rate_bps = 1000000000;
  options.format = OutputFormat::kJson;
  std::ostringstream out, err;
  ASSERT_EQ(RunModel(options, out, err), 0) << err.str();
  const std::string text = out.str();
  EXPECT_NE(text.find("{\"algorithm\": \"ring\", \"workers\": 4, \"bytes\": 1048576, "
                      "\"rounds\": 6, \"bottleneck_bytes\": 1572864, \"model_time_us\": 12642.912, "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("{\"algorithm\": \"ps\", \"workers\": 4, \"bytes\": 1048576, "
                      "\"rounds\": 2, \"bottleneck_bytes\": 8388608, "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"naive\""), std::string::npos);
  EXPECT_NE(text.find("\"butterfly\""), std::string::npos);
}

// A results file as `testbed local --out` writes it, with times from the model.
std::string SampleResults(const LinkModel& link) {
  std::ostringstream text;
  text << R"({"record": "experiment", "started_at": "2026-01-01T00:00:00Z", "host": )"
          R"({"name": "vm", "cpus": 2}, "spec": {"algorithms": ["ps", "ring"], "servers": 2}})"
       << "\n\n";
  for (std::int64_t bytes : {4096, 262144, 4194304}) {
    const CostEstimate ring = EstimateCollective(*FindCollective("ring"), 4, bytes, 4, link);
    const CostEstimate ps = EstimateParameterServer(4, 2, bytes, 4, link);
    char line[512];
    std::snprintf(line, sizeof line,
                  R"({"record": "result", "algorithm": "ring", "workers": 4, "bytes": %lld, )"
                  R"("time_us_avg": %.17g, "dtype": "float32", "transport": "ucx:tcp/lo.0", )"
                  R"("servers": 0, "wire_bytes_sent": []})",
                  static_cast<long long>(bytes), ring.time_s * 1e6);
    text << line << "\n";
    std::snprintf(line, sizeof line,
                  R"({"record": "result", "algorithm": "ps", "workers": 4, "bytes": %lld, )"
                  R"("time_us_avg": %.17g, "dtype": "float32", "transport": "grpc", )"
                  R"("servers": 2, "shard_payload_bytes": [1, 2]})",
                  static_cast<long long>(bytes), ps.time_s * 1e6);
    text << line << "\n";
  }
  return text.str();
}

TEST(FitCommandTest, ReadsResultRecordsOnly) {
  std::istringstream in(SampleResults(LinkModel{20e-6, 8e-9}));
  const auto rows = ReadResultRows(in);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 6u);
  EXPECT_EQ((*rows)[0].algorithm(), "ring");
  EXPECT_EQ((*rows)[0].transport(), "ucx:tcp/lo.0");
  EXPECT_EQ((*rows)[0].servers(), 0u);  // not a ps row
  EXPECT_EQ((*rows)[1].servers(), 2u);
  EXPECT_EQ((*rows)[1].bytes(), 4096);

  std::istringstream broken("{\"record\": \"result\", \"algorithm\": \"ring\"}\n");
  const auto bad = ReadResultRows(broken);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 1"), std::string::npos) << bad.status();
}

TEST(FitCommandTest, RecoversTheModelsParametersPerGroup) {
  std::istringstream in(SampleResults(LinkModel{20e-6, 8e-9}));  // 20 us, 1 Gbit/s
  const auto rows = ReadResultRows(in);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::ostringstream out, err;
  ASSERT_EQ(RunFit(*rows, OutputFormat::kCsv, out, err), 0) << err.str();
  EXPECT_EQ(out.str().substr(0, out.str().find('\n')),
            "algorithm,transport,workers,points,sizes,alpha_us,beta_ns_per_byte,link_gbit_s,r2,"
            "worst_rel_residual");
  EXPECT_NE(out.str().find("\nring,ucx:tcp/lo.0,4,3,3,20,8,1,1,"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("ps,grpc,4,3,3,20,8,1,1,"), std::string::npos) << out.str();
}

TEST(FitCommandTest, SaysWhenAGroupHasOneSize) {
  proto::ResultRow row;
  row.set_algorithm("ring");
  row.set_transport("tcp");
  row.set_dtype("float32");
  row.set_workers(4);
  row.set_bytes(4096);
  row.set_time_us_avg(100);
  std::vector<proto::ResultRow> rows = {row, row};
  rows[1].set_time_us_avg(110);
  std::ostringstream out, err;
  EXPECT_NE(RunFit(rows, OutputFormat::kTable, out, err), 0);
  EXPECT_NE(err.str().find("ring (tcp): needs at least 2 distinct sizes"), std::string::npos)
      << err.str();
}

using testing::RunCli;

TEST(CostModelCliTest, BadInputGetsAClearMessage) {
  struct Case {
    const char* args;
    const char* message;
  };
  for (const Case& c : {
           Case{"model --alpha 50xs", "bad duration '50xs'"},
           Case{"model --link-rate 1gbps", "bad link rate '1gbps'"},
           Case{"model --algorithms ps,hypercube", "unknown algorithm 'hypercube'"},
           Case{"model --servers 0", "--servers"},
           Case{"fit /nonexistent/results.jsonl", "/nonexistent/results.jsonl"},
       }) {
    const auto [status, output] = RunCli(c.args);
    EXPECT_NE(status, 0) << c.args;
    EXPECT_NE(output.find(c.message), std::string::npos) << c.args << "\n" << output;
  }
}

TEST(CostModelCliTest, FitReadsAFile) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("cost_model_test_" + std::to_string(::getpid()) + ".jsonl");
  std::ofstream(path) << SampleResults(LinkModel{20e-6, 8e-9});
  const auto [status, output] = RunCli("fit " + path.string() + " --format json");
  std::filesystem::remove(path);
  EXPECT_EQ(status, 0) << output;
  // The fit recovers the link the samples were made with: alpha 20 us, beta
  // 8 ns/byte. Read as numbers: "alpha_us": 2 as text would also match 20,
  // 200 or 2.5 - a prefix.
  const std::string head =
      "{\"algorithm\": \"ring\", \"transport\": \"ucx:tcp/lo.0\", "
      "\"workers\": \"4\", \"points\": 3, \"sizes\": 3, \"alpha_us\": ";
  const std::size_t at = output.find(head);
  ASSERT_NE(at, std::string::npos) << output;
  char* end = nullptr;
  const double alpha_us = std::strtod(output.c_str() + at + head.size(), &end);
  EXPECT_NEAR(alpha_us, 20, 1e-6) << output;
  ASSERT_EQ(std::string(end, 22), ", \"beta_ns_per_byte\": ") << output;
  EXPECT_NEAR(std::strtod(end + 22, nullptr), 8, 1e-9) << output;
}

}  // namespace
}  // namespace testbed
