// The simulator against measured runs: the fit finds the alpha that made a
// run, and the recorded emulated points (experiments/reference/
// simulator_validation.jsonl, measured by experiments/bench/
// simulator_validation.sh) stay within the bounds docs/simulator.md states:
// a change to the model that makes it worse against them fails here, with
// no emulation needed.
#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "experiments/cli/simulate_command.h"
#include "experiments/cli/simulate_validation.h"
#include "proto/spec.h"

namespace testbed {
namespace {

// A run of ring and ps on 4 workers at 100 Mbit whose medians are the
// simulator's own at `alpha_us`, times `scale`.
RecordedRun RunMadeBySimulator(double alpha_us, double scale) {
  RecordedRun run;
  run.spec.set_name("made");
  run.spec.set_workers(4);
  run.spec.set_network(proto::Network::netns);
  run.spec.set_link_rate_bps(100'000'000);
  run.spec.set_servers(2);
  ApplyDefaults(run.spec);
  run.spec.set_model_alpha_us(alpha_us);
  for (const char* algorithm : {"ring", "ps"}) {
    for (std::int64_t bytes : {std::int64_t{4096}, std::int64_t{65536}, std::int64_t{4} << 20}) {
      proto::ResultRow row = *SimulateRow(run.spec, algorithm, bytes);
      row.set_transport(algorithm == std::string("ps") ? "grpc:tcp/eth0" : "ucx:tcp/eth0");
      row.set_time_us_p50(row.time_us_avg() * scale);
      run.rows.push_back(row);
    }
  }
  return run;
}

TEST(SimulateValidationTest, TheFitFindsTheAlphaARunWasMadeWith) {
  absl::StatusOr<Validation> v = ValidateSimulator({RunMadeBySimulator(300, 1)}, std::nullopt, 0);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_NEAR(v->calibration.schedules_alpha_us, 300, 1);
  EXPECT_NEAR(v->calibration.ps_alpha_us, 300, 1);
  EXPECT_EQ(v->calibration.schedules_points, 2);
  EXPECT_LT(v->all.worst, 1e-3);
}

TEST(SimulateValidationTest, ErrorsAreSimulatedOverMeasured) {
  // Measured 25% slower than the model everywhere: every error is -20%.
  absl::StatusOr<Validation> v = ValidateSimulator({RunMadeBySimulator(300, 1.25)}, 300.0, 0);
  ASSERT_TRUE(v.ok()) << v.status();
  for (const ValidationPoint& p : v->points) EXPECT_NEAR(p.error(), -0.2, 1e-6) << p.algorithm;
  EXPECT_NEAR(v->all.large_geomean, 0.2, 1e-6);
  EXPECT_NEAR(v->all.worst, 0.2, 1e-6);
}

const AlgorithmError* Find(const Validation& v, std::string_view link, std::string_view algorithm) {
  for (const AlgorithmError& e : v.by_algorithm) {
    if (e.link == link && e.algorithm == algorithm) return &e;
  }
  return nullptr;
}

TEST(SimulateValidationTest, TheRecordedEmulatedPointsStayWithinTheStatedBounds) {
  absl::StatusOr<std::vector<RecordedRun>> runs =
      ReadRecordedRuns({TESTBED_SOURCE_DIR "/experiments/reference/simulator_validation.jsonl"});
  ASSERT_TRUE(runs.ok()) << runs.status();
  absl::StatusOr<Validation> v = ValidateSimulator(*runs, std::nullopt, 0);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->points.size(), 186u);
  // The geometric means as recorded (docs/simulator.md, Validation), rounded
  // up: below 1 MiB within the 15% asked for; at 1 MiB and more the 5% asked
  // for holds at 1 Gbit/s, not at 100 Mbit/s, where faithful 1 ms token buckets
  // cost the emulation enough CPU at N = 8 to slow its large transfers.
  EXPECT_LE(v->all.large_geomean, 0.065);
  EXPECT_LE(v->all.small_geomean, 0.085);
  const AlgorithmError* slow = Find(*v, "100mbit", "all");
  const AlgorithmError* fast = Find(*v, "1gbit", "all");
  ASSERT_NE(slow, nullptr);
  ASSERT_NE(fast, nullptr);
  EXPECT_LE(slow->large_geomean, 0.075);
  EXPECT_LE(slow->small_geomean, 0.045);
  EXPECT_LE(fast->large_geomean, 0.045);
  // Where the model is exact (symmetric rounds, links that never idle) it
  // lands closest: the ring at 100 Mbit, where the links decide.
  const AlgorithmError* ring = Find(*v, "100mbit", "ring");
  ASSERT_NE(ring, nullptr);
  EXPECT_LE(ring->large_geomean, 0.04);
  EXPECT_LE(ring->small_geomean, 0.025);
  // The points beyond 20% (docs/simulator.md says which effects they lack):
  // no more than recorded, so the model cannot quietly lose more of them.
  const auto beyond = std::count_if(v->points.begin(), v->points.end(),
                                    [](const ValidationPoint& p) { return std::abs(p.error()) > 0.2; });
  EXPECT_LE(beyond, 34);
}

TEST(SimulateValidationTest, RunsWithoutShapedLinksAreRefusedNamingThem) {
  RecordedRun run = RunMadeBySimulator(50, 1);
  run.spec.set_network(proto::Network::loopback);
  absl::StatusOr<Validation> v = ValidateSimulator({run}, std::nullopt, 0);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("run 'made'"), std::string::npos) << v.status();
}

}  // namespace
}  // namespace testbed
