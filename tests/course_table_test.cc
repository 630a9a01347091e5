// The course notes' table (testbed report, and the .md beside `--out`):
// sections per N and M, traffic measured / formula, wire bytes, time against
// the link model and the fitted model, the bottleneck link.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "allreduce/cost_model.h"
#include "experiments/results/course_table.h"

namespace testbed {
namespace {

constexpr std::int64_t kMiB = 1 << 20;

// A row whose time is exactly the model's, for alpha 100 us, 1 Gbit/s links.
proto::ResultRow ModelRow(const std::string& algorithm, int workers, std::int64_t bytes,
                          int servers = 1) {
  const LinkModel link{100e-6, 8.0 / 1e9};
  const CostEstimate e = *EstimateAlgorithm(algorithm, workers, servers, bytes, 4, link);
  proto::ResultRow row;
  row.set_algorithm(algorithm);
  row.set_transport("ucx:tcp/eth0.0");
  row.set_dtype("float32");
  row.set_workers(workers);
  row.set_bytes(bytes);
  row.set_servers(servers);
  row.set_time_us_avg(e.time_s * 1e6);
  row.set_model_time_us(e.time_s * 1e6);
  row.set_rounds(e.rounds);
  row.set_payload_bytes_total(2 * (workers - 1) * bytes);
  row.set_theory_bytes_total(2 * (workers - 1) * bytes);
  return row;
}

std::string Table(const std::vector<proto::ResultRow>& rows) {
  std::ostringstream out;
  EXPECT_TRUE(PrintCourseTable(rows, out).ok());
  return out.str();
}

TEST(CourseTableTest, OneSectionPerNAndSizeWithEveryColumn) {
  const std::string table =
      Table({ModelRow("ring", 4, kMiB), ModelRow("ring", 4, 4 * kMiB), ModelRow("ring", 2, kMiB)});
  EXPECT_NE(table.find("## N = 2, M = 1MiB"), std::string::npos) << table;
  EXPECT_NE(table.find("## N = 4, M = 1MiB"), std::string::npos) << table;
  EXPECT_NE(table.find("## N = 4, M = 4MiB"), std::string::npos) << table;
  // N = 4, 1 MiB: 6 MiB of traffic, all of it the closed form; no wire counters.
  EXPECT_NE(table.find("| ring | ucx:tcp/eth0.0 | 6.0 MiB / 6.0 MiB | – | 6 |"),
            std::string::npos)
      << table;
  // Times equal to the model: 1.00x against the link model and the fit.
  EXPECT_NE(table.find("(1.00×) | "), std::string::npos) << table;
  EXPECT_EQ(table.find("(0.9"), std::string::npos) << table;
  // Ring's busiest link: 2(N-1)/N * M = 1.5 MiB for N = 4.
  EXPECT_NE(table.find("every link: 2(N−1)/N·M each way = 1.5 MiB"), std::string::npos) << table;
  EXPECT_NE(table.find("## The fitted model"), std::string::npos) << table;
  EXPECT_NE(table.find("1.000 Gbit/s"), std::string::npos) << table;
}

// A slow host (worker 2's link at a quarter of the rate): its row names rank 2
// and how far behind the fastest it was; rows whose ranks agree stay out.
TEST(CourseTableTest, RanksMoreThanTenPercentApartAreNamedSlowestFirst) {
  proto::ResultRow slow = ModelRow("ps", 4, 4 * kMiB, 4);
  slow.set_fabric("flat");
  for (std::uint64_t us : {1908000, 1707000, 2494000, 1774000}) slow.add_rank_time_us_p50(us);
  proto::ResultRow even = ModelRow("ring", 4, 4 * kMiB);
  for (std::uint64_t us : {1000000, 1050000, 1020000, 1090000}) even.add_rank_time_us_p50(us);
  const std::string table = Table({slow, even});
  EXPECT_NE(table.find("## Ranks apart"), std::string::npos) << table;
  EXPECT_NE(table.find("| 4 | 4.0 MiB | ps | flat | 2 | 2.49 s | 1 | 1.71 s | 1.46× |"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("| ring | flat |"), std::string::npos) << table;
  EXPECT_EQ(Table({even}).find("## Ranks apart"), std::string::npos);
}

TEST(CourseTableTest, ParameterServerNamesItsShardsAndShowsWireBytes) {
  proto::ResultRow ps = ModelRow("ps", 4, 16 * kMiB, /*servers=*/2);
  ps.set_wire_bytes_sent_total(65 * kMiB);      // the pushes
  ps.set_wire_bytes_received_total(66 * kMiB);  // the pulls
  const std::string table = Table({ps});
  // Full duplex: 4 first 1 MiB chunks, then 4 slices of 8 MiB in and out at once.
  EXPECT_NE(table.find("the server's link: N first chunks in, then N·M/S in and out at once = "
                       "36.0 MiB (S = 2)"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| 131.0 MiB |"), std::string::npos) << table;
}

TEST(CourseTableTest, ALaterMeasurementReplacesAnEarlierOne) {
  proto::ResultRow first = ModelRow("butterfly", 4, kMiB);
  proto::ResultRow second = first;
  second.set_time_us_avg(2 * first.time_us_avg());
  const std::string table = Table({first, second});
  EXPECT_EQ(table.find("| butterfly |"), table.rfind("| butterfly |")) << table;
  EXPECT_NE(table.find("(2.00×)"), std::string::npos) << table;
}

TEST(CourseTableTest, NothingToShowIsAnError) {
  std::ostringstream out;
  EXPECT_FALSE(PrintCourseTable({}, out).ok());
}

TEST(CourseTableTest, MarkdownGoesBesideTheResults) {
  EXPECT_EQ(CourseTablePathFor("runs/r.jsonl"), "runs/r.md");
  EXPECT_EQ(CourseTablePathFor("r.json"), "r.md");
  EXPECT_EQ(CourseTablePathFor("results"), "results.md");
}

}  // namespace
}  // namespace testbed
