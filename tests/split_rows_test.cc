// The harness's split (ExperimentSpec.split, proto/experiment.proto), as
// nccl-tests' NCCL_TESTS_SPLIT: every rank of a sweep (worker/sweep_runner.cc)
// runs each collective in its group, exactly, its inputs shifted by its
// group (allreduce/expected_values.h's phase) so a value leaked in from
// another group fails the check; the aggregator makes a row per group
// (proto/result_aggregator.h) with the group's size, members and rack
// crossings; the simulator plays all the groups on the fabric at once; and
// the spec refuses what a split cannot mean.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "allreduce/collectives.h"
#include "allreduce/expected_values.h"
#include "allreduce/transport/inprocess_transport.h"
#include "experiments/cli/simulate_command.h"
#include "experiments/results/result_row.h"
#include "proto/result_aggregator.h"
#include "proto/spec.h"
#include "worker/sweep_runner.h"

namespace testbed {
namespace {

proto::ExperimentSpec SplitSpec(int workers, const std::string& split) {
  proto::ExperimentSpec spec;
  spec.set_workers(static_cast<std::uint32_t>(workers));
  for (const Collective* c : CollectivesOf(Kinds::kScheduled)) spec.add_algorithms(std::string(c->name));
  spec.add_sizes(4 * 1001);
  spec.set_iterations(1);
  spec.set_split(split);
  ApplyDefaults(spec);
  return spec;
}

// Every rank's results of the sweep, run in process: [rank][row].
std::vector<std::vector<proto::RankResult>> Sweep(const proto::ExperimentSpec& spec) {
  const int n = static_cast<int>(spec.workers());
  InProcessFabric fabric(n);
  std::vector<std::vector<proto::RankResult>> results(static_cast<std::size_t>(n));
  std::vector<absl::Status> status(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto transport = fabric.Connect(r);
      SweepEnvironment env;
      env.transport = transport.get();
      env.transport_label = "inprocess";
      status[r] = RunSweep(spec, env, [&](const proto::RankResult& result) {
        results[r].push_back(result);
        return absl::OkStatus();
      });
      if (!status[r].ok()) fabric.MarkLost(r);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
  return results;
}

class SplitSweepTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SplitSweepTest, EveryGroupGetsItsOwnExactResultAndItsOwnRow) {
  const proto::ExperimentSpec spec = SplitSpec(6, GetParam());
  ASSERT_TRUE(ValidateSpec(spec).ok()) << ValidateSpec(spec);
  const RankGroups groups = *GroupsOf(spec, 6);
  const std::vector<std::vector<proto::RankResult>> results = Sweep(spec);
  ASSERT_EQ(results[0].size(), static_cast<std::size_t>(spec.algorithms_size()));
  for (std::size_t row = 0; row < results[0].size(); ++row) {
    std::vector<proto::RankResult> by_rank;
    for (const auto& rank : results) by_rank.push_back(rank[row]);
    absl::StatusOr<std::vector<proto::ResultRow>> rows = AggregateRows(spec, by_rank);
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(rows->size(), groups.members.size());
    for (std::size_t g = 0; g < rows->size(); ++g) {
      const proto::ResultRow& r = (*rows)[g];
      SCOPED_TRACE(r.algorithm() + " group " + std::to_string(g));
      const auto size = static_cast<std::uint32_t>(groups.members[g].size());
      EXPECT_EQ(r.wrong(), 0);
      EXPECT_EQ(r.workers(), size);
      EXPECT_EQ(r.group(), g);
      EXPECT_EQ(r.split(), GetParam());
      ASSERT_EQ(r.group_ranks_size(), static_cast<int>(size));
      for (std::uint32_t i = 0; i < size; ++i) {
        EXPECT_EQ(r.group_ranks(static_cast<int>(i)), static_cast<std::uint32_t>(groups.members[g][i]));
      }
      // The group's own closed form, the group's size in it.
      const Collective* c = FindCollective(r.algorithm());
      EXPECT_EQ(r.theory_bytes_total(), c->formula_bytes(static_cast<int>(size), r.bytes()));
      EXPECT_EQ(r.payload_bytes_total(), r.theory_bytes_total());
    }
  }
}

// div:2: three groups of 2; mod:2: two of 3 (0,2,4 and 1,3,5); div:4: one of
// 4 and one of 2 (nccl-tests' uneven last colour).
INSTANTIATE_TEST_SUITE_P(Splits, SplitSweepTest, ::testing::Values("div:2", "mod:2", "div:4", "mod:6"),
                         [](const auto& info) {
                           std::string name = info.param;
                           name[3] = '_';
                           return name;
                         });

TEST(SplitCheck, AValueFromAnotherGroupsRankOfTheSameIndexIsWrong) {
  // Two groups of 2, each reduced alone: rank 0 of group 0 holds the sum of
  // group 1's inputs instead of its own group's. Without the phase both
  // groups fill alike and this would pass.
  const std::int64_t count = 64;
  std::vector<std::byte> a(count * 4), b(count * 4), sum(count * 4);
  FillInput(Semantics::kAllReduce, 2, 0, count, DataType::kFloat32, 0, a.data(), /*phase=*/1);
  FillInput(Semantics::kAllReduce, 2, 1, count, DataType::kFloat32, 0, b.data(), /*phase=*/1);
  for (std::int64_t i = 0; i < count; ++i) {
    StoreElement(DataType::kFloat32, sum.data(), i,
                 LoadElement(DataType::kFloat32, a.data(), i) + LoadElement(DataType::kFloat32, b.data(), i));
  }
  EXPECT_EQ(CheckRank(Semantics::kAllReduce, 2, 0, sum.data(), count, DataType::kFloat32,
                      ReduceOp::kSum, 0, /*phase=*/1).count, 0);
  EXPECT_GT(CheckRank(Semantics::kAllReduce, 2, 0, sum.data(), count, DataType::kFloat32,
                      ReduceOp::kSum, 0, /*phase=*/0).count, 0);
}

proto::ExperimentSpec RackSpec(const std::string& split) {
  proto::ExperimentSpec spec;
  spec.set_workers(8);
  spec.add_algorithms("ring");
  spec.add_sizes(4 << 20);
  spec.set_iterations(1);
  spec.set_network(proto::Network::netns);
  spec.set_link_rate_bps(100'000'000);
  spec.mutable_fabric()->set_racks(2);
  spec.mutable_fabric()->set_oversubscription(4);
  spec.set_split(split);
  ApplyDefaults(spec);
  return spec;
}

TEST(SplitOnRacks, GroupsInsideRacksCrossNothingAndAcrossRacksShareTheUplinks) {
  // Packed, ranks 0-3 in rack 0 and 4-7 in rack 1: div:4 is one ring per
  // rack; mod:2 is two rings of every other rank, each crossing twice.
  absl::StatusOr<std::vector<proto::ResultRow>> inside = SimulateRows(RackSpec("div:4"), "ring", 4 << 20);
  absl::StatusOr<std::vector<proto::ResultRow>> across = SimulateRows(RackSpec("mod:2"), "ring", 4 << 20);
  ASSERT_TRUE(inside.ok()) << inside.status();
  ASSERT_TRUE(across.ok()) << across.status();
  ASSERT_EQ(inside->size(), 2u);
  ASSERT_EQ(across->size(), 2u);
  for (std::size_t g = 0; g < 2; ++g) {
    EXPECT_EQ((*inside)[g].workers(), 4u);
    EXPECT_EQ((*inside)[g].cross_rack_theory_bytes(), 0u);
    EXPECT_GT((*across)[g].cross_rack_theory_bytes(), 0u);
    EXPECT_EQ((*inside)[g].payload_bytes_total(), (*across)[g].payload_bytes_total());
    // Both rings cross each 4:1 uplink (a quarter of a host link): slower.
    EXPECT_GT((*across)[g].time_us_avg(), 1.5 * (*inside)[g].time_us_avg());
  }
  // One world row from a split that makes two is refused, not made up.
  EXPECT_FALSE(SimulateRow(RackSpec("div:4"), "ring", 4 << 20).ok());
}

// A row's rounds are its group's on the racks: hierarchical over 2 racks of 4
// takes 2(4-1) + 2(2-1); each mod:2 group of ranks 0,2,4,6 (or 1,3,5,7) sits
// in 2 racks of 2 and takes 2(2-1) + 2(2-1); a ring's stay 2(N-1).
TEST(SplitOnRacks, EachRowsRoundsAreItsGroupsOnTheRacks) {
  absl::StatusOr<std::vector<proto::ResultRow>> world =
      SimulateRows(RackSpec(""), "hierarchical", 4 << 20);
  absl::StatusOr<std::vector<proto::ResultRow>> groups =
      SimulateRows(RackSpec("mod:2"), "hierarchical", 4 << 20);
  absl::StatusOr<std::vector<proto::ResultRow>> ring = SimulateRows(RackSpec(""), "ring", 4 << 20);
  ASSERT_TRUE(world.ok()) << world.status();
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_TRUE(ring.ok()) << ring.status();
  ASSERT_EQ(world->size(), 1u);
  EXPECT_EQ((*world)[0].rounds(), 8u);
  ASSERT_EQ(groups->size(), 2u);
  for (const proto::ResultRow& row : *groups) EXPECT_EQ(row.rounds(), 4u);
  EXPECT_EQ((*ring)[0].rounds(), 14u);
}

// The measured pair (experiments/reference/split_racks.jsonl, docs/fabrics.md:
// `testbed local --network netns` at N = 8 on two racks of four at 4:1)
// simulated again from the specs it ran with: every group within 15% of its
// median, and across racks slower than inside by the same factor, within 15%.
TEST(SplitOnRacks, TheSimulatorPlaysTheRecordedPairWithinItsBounds) {
  absl::StatusOr<std::vector<RecordedRun>> runs =
      ReadRecordedRuns({TESTBED_SOURCE_DIR "/experiments/reference/split_racks.jsonl"});
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 2u);
  std::map<std::string, double> measured, simulated;  // by split and algorithm: the groups' mean
  for (const RecordedRun& run : *runs) {
    for (const proto::ResultRow& row : run.rows) {
      SCOPED_TRACE(row.split() + " " + row.algorithm() + " group " + std::to_string(row.group()));
      EXPECT_EQ(row.wrong(), 0);
      absl::StatusOr<std::vector<proto::ResultRow>> sim =
          SimulateRows(run.spec, row.algorithm(), row.bytes());
      ASSERT_TRUE(sim.ok()) << sim.status();
      const double simulated_us = (*sim)[row.group()].time_us_avg();
      EXPECT_NEAR(simulated_us / row.time_us_p50(), 1.0, 0.15);
      measured[row.split() + row.algorithm()] += row.time_us_p50() / 2;
      simulated[row.split() + row.algorithm()] += simulated_us / 2;
    }
  }
  for (const std::string algorithm : {"ring", "butterfly"}) {
    SCOPED_TRACE(algorithm);
    const double measured_ratio = measured["mod:2" + algorithm] / measured["div:4" + algorithm];
    const double simulated_ratio = simulated["mod:2" + algorithm] / simulated["div:4" + algorithm];
    EXPECT_GT(measured_ratio, 1.8);
    EXPECT_NEAR(simulated_ratio / measured_ratio, 1.0, 0.15);
  }
}

TEST(SplitSpec, RefusesWhatASplitCannotMean) {
  const auto refused = [](proto::ExperimentSpec spec) { return !ValidateSpec(spec).ok(); };
  EXPECT_TRUE(ValidateSpec(SplitSpec(6, "div:3")).ok());
  EXPECT_TRUE(ValidateSpec(SplitSpec(6, "")).ok());
  EXPECT_TRUE(refused(SplitSpec(6, "div")));
  EXPECT_TRUE(refused(SplitSpec(6, "ring:2")));
  EXPECT_TRUE(refused(SplitSpec(6, "mod:0")));
  EXPECT_TRUE(refused(SplitSpec(6, "div:7")));  // more than the ranks
  proto::ExperimentSpec sweep = SplitSpec(6, "div:4");
  sweep.add_worker_counts(6);
  sweep.add_worker_counts(2);  // k over N at one count of the sweep
  EXPECT_TRUE(refused(sweep));
  proto::ExperimentSpec ps = SplitSpec(6, "div:3");
  ps.add_algorithms("ps");
  EXPECT_TRUE(refused(ps));
  proto::ExperimentSpec timeline = SplitSpec(6, "div:3");
  timeline.set_record_rounds(true);
  EXPECT_TRUE(refused(timeline));
}

}  // namespace
}  // namespace testbed
