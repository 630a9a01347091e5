// The simulator against what can be worked out by hand: max-min sharing of
// links, the ring's closed form, rings across racks, stragglers, the cost
// model where rounds are symmetric, and BytePS's bound for the parameter
// server (docs/simulator.md).
#include <cmath>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "allreduce/collective.h"
#include "allreduce/cost_model.h"
#include "allreduce/simulator/flow_simulator.h"
#include "allreduce/simulator/simulation.h"
#include "allreduce/traffic.h"

namespace testbed {
namespace {

constexpr double kRate = 100e6;        // bit/s
constexpr double kBytesPerS = kRate / 8;
constexpr double kAlpha = 50e-6;

// Runs `sim` to the end; the time each tag's event came.
std::vector<double> EndTimes(FlowSimulator& sim, int tags) {
  std::vector<double> ends(static_cast<std::size_t>(tags), -1);
  std::vector<SimEvent> events;
  while (sim.Next(events)) {
    for (const SimEvent& e : events) ends[e.tag] = sim.now();
    events.clear();
  }
  return ends;
}

TEST(FlowSimulatorTest, OneFlowTakesItsLatencyAndItsBytesAtTheLinksRate) {
  FlowSimulator sim;
  FlowPath path;
  path.Add(sim.AddLink(1000));
  sim.StartFlow(path, 500, 0.25, 0);
  EXPECT_DOUBLE_EQ(EndTimes(sim, 1)[0], 0.75);
}

TEST(FlowSimulatorTest, FlowsOnOneLinkShareItAndTheLastGetsItAllOnceAloneIsLeft) {
  FlowSimulator sim;
  FlowPath path;
  path.Add(sim.AddLink(1000));
  sim.StartFlow(path, 1000, 0, 0);  // at 500/s until t = 2
  sim.StartFlow(path, 2000, 0, 1);  // 1000 by t = 2, then the rest at 1000/s
  const std::vector<double> ends = EndTimes(sim, 2);
  EXPECT_DOUBLE_EQ(ends[0], 2.0);
  EXPECT_DOUBLE_EQ(ends[1], 3.0);
}

TEST(FlowSimulatorTest, AFlowHeldBackElsewhereLeavesItsShareToTheOthers) {
  // Max-min: b is limited to 250/s by its second link; a takes the 750 left.
  FlowSimulator sim;
  const int shared = sim.AddLink(1000);
  const int narrow = sim.AddLink(250);
  FlowPath a, b;
  a.Add(shared);
  b.Add(shared);
  b.Add(narrow);
  sim.StartFlow(a, 750, 0, 0);
  sim.StartFlow(b, 250, 0, 1);
  const std::vector<double> ends = EndTimes(sim, 2);
  EXPECT_DOUBLE_EQ(ends[0], 1.0);
  EXPECT_DOUBLE_EQ(ends[1], 1.0);
}

TEST(FlowSimulatorTest, EachDirectionIsItsOwnLinkAndTimersRing) {
  FlowSimulator sim;
  FlowPath up, down;
  up.Add(sim.AddLink(1000));
  down.Add(sim.AddLink(1000));
  sim.StartFlow(up, 1000, 0, 0);
  sim.StartFlow(down, 1000, 0, 1);
  sim.Wake(0.5, 2);
  const std::vector<double> ends = EndTimes(sim, 3);
  EXPECT_DOUBLE_EQ(ends[0], 1.0);
  EXPECT_DOUBLE_EQ(ends[1], 1.0);
  EXPECT_DOUBLE_EQ(ends[2], 0.5);
}

SimSetup Flat(int n, double bps = kRate) {
  SimSetup setup;
  setup.rates.host_bps.assign(static_cast<std::size_t>(n), bps);
  setup.alpha_s = kAlpha;
  return setup;
}

double Slowest(const SimResult& result) {
  double slowest = 0;
  for (const SimRank& r : result.ranks) slowest = std::max(slowest, r.time_s);
  return slowest;
}

double Simulated(std::string_view algorithm, int n, std::int64_t bytes, const SimSetup& setup) {
  const Collective* c = FindCollective(algorithm);
  absl::StatusOr<SimResult> result =
      c->has_schedule() ? SimulateSchedule(*c, n, bytes, 4, setup)
                        : SimulateParameterServer(n, 1, bytes, 4, setup);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? Slowest(*result) : -1;
}

TEST(ScheduleSimulationTest, RingOnOneSwitchIsTheClosedForm) {
  for (int n : {2, 3, 4, 8, 16}) {
    const std::int64_t bytes = std::int64_t{4} * n * 65536;  // n equal chunks
    const double closed = 2 * (n - 1) * (kAlpha + static_cast<double>(bytes) / n / kBytesPerS);
    EXPECT_NEAR(Simulated("ring", n, bytes, Flat(n)), closed, closed * 1e-9) << "N = " << n;
  }
}

TEST(ScheduleSimulationTest, SymmetricSchedulesTakeTheCostModelsTimeAndMoveItsBytes) {
  // Ring, butterfly, halving-doubling and naive keep every rank in step, so
  // playing them as flows gives the model's sum over rounds of the busiest link.
  for (std::string_view name : {"ring", "butterfly", "halving-doubling", "naive"}) {
    for (int n : {2, 4, 8}) {
      const Collective& c = *FindCollective(name);
      const std::int64_t bytes = std::int64_t{1} << 20;
      const SimSetup setup = Flat(n);
      const CostEstimate model =
          EstimateOnFabric(c, n, bytes, 4, kAlpha, setup.placement, setup.rates);
      absl::StatusOr<SimResult> sim = SimulateSchedule(c, n, bytes, 4, setup);
      ASSERT_TRUE(sim.ok()) << sim.status();
      EXPECT_NEAR(Slowest(*sim), model.time_s, model.time_s * 1e-9) << name << " N = " << n;
      const TrafficSummary traffic = CountTraffic(c, n, bytes, 4);
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(sim->ranks[r].bytes_sent, traffic.per_rank[r].bytes_sent) << name;
        EXPECT_EQ(sim->ranks[r].bytes_received, traffic.per_rank[r].bytes_received) << name;
      }
    }
  }
}

TEST(ScheduleSimulationTest, NoScheduleIsSlowerThanTheModelThatWaitsForEveryRoundsSlowestLink) {
  // Without a barrier between rounds a rank goes on as soon as its own round
  // ends: never later than the model, whose rounds all wait for the busiest.
  for (const Collective* c : CollectivesOf(Kinds::kScheduled)) {
    for (int n : {3, 5, 6, 7}) {
      const std::int64_t bytes = std::int64_t{4} * 3000;
      const SimSetup setup = Flat(n);
      const CostEstimate model =
          EstimateOnFabric(*c, n, bytes, 4, kAlpha, setup.placement, setup.rates);
      absl::StatusOr<SimResult> sim = SimulateSchedule(*c, n, bytes, 4, setup);
      ASSERT_TRUE(sim.ok()) << c->name << ": " << sim.status();
      EXPECT_LE(Slowest(*sim), model.time_s * (1 + 1e-9)) << c->name << " N = " << n;
      EXPECT_GT(Slowest(*sim), 0) << c->name;
    }
  }
}

// 2 racks of 4 hosts, each rack's uplink at `uplink_bps`.
SimSetup TwoRacks(bool round_robin, double uplink_bps) {
  SimSetup setup = Flat(8);
  setup.placement = round_robin ? Placement::RoundRobin({4, 4}) : Placement::Packed({4, 4});
  setup.rates.uplink_bps = {uplink_bps, uplink_bps};
  return setup;
}

TEST(ScheduleSimulationTest, ARingWhoseHopsAllCrossRacksQueuesFourFlowsOnEachUplink) {
  // 4:1 uplinks (4 hosts x B / 4 = B): packed, one hop per direction crosses
  // each uplink, as fast as one switch; round robin, all four do.
  const std::int64_t bytes = std::int64_t{8} * 4 * 65536;
  const double step = static_cast<double>(bytes) / 8 / kBytesPerS;
  const double packed = Simulated("ring", 8, bytes, TwoRacks(false, kRate));
  const double dealt = Simulated("ring", 8, bytes, TwoRacks(true, kRate));
  EXPECT_NEAR(packed, 14 * (kAlpha + step), packed * 1e-9);
  EXPECT_NEAR(dealt, 14 * (kAlpha + 4 * step), dealt * 1e-9);
}

TEST(ScheduleSimulationTest, HierarchicalCrossesAnOversubscribedUplinkLessThanTheDealtRing) {
  const std::int64_t bytes = std::int64_t{4} << 20;
  const SimSetup dealt = TwoRacks(true, kRate / 2);
  EXPECT_LT(Simulated("hierarchical", 8, bytes, dealt), Simulated("ring", 8, bytes, dealt));
}

TEST(ScheduleSimulationTest, OneSlowLinkDecidesEveryRingStep) {
  const int n = 4;
  const std::int64_t bytes = std::int64_t{4} * n * 65536;
  SimSetup setup = Flat(n);
  setup.rates.host_bps[2] = kRate / 2;
  const double closed = 2 * (n - 1) * (kAlpha + 2 * static_cast<double>(bytes) / n / kBytesPerS);
  EXPECT_NEAR(Simulated("ring", n, bytes, setup), closed, closed * 1e-9);
}

TEST(ScheduleSimulationTest, ALateRankDelaysTheOthersAndNotItsOwnTime) {
  const int n = 4;
  const std::int64_t bytes = std::int64_t{4} * n * 65536;
  const double on_time = Simulated("ring", n, bytes, Flat(n));
  SimSetup setup = Flat(n);
  setup.start_delay_s = {0, 0.5, 0, 0};
  absl::StatusOr<SimResult> late = SimulateSchedule(*FindCollective("ring"), n, bytes, 4, setup);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_NEAR(Slowest(*late), on_time + 0.5, 1e-9);
  EXPECT_NEAR(late->ranks[1].time_s, on_time, 1e-9);
}

// Rank 0 sends to rank 1, which never receives.
Schedule Unmatched(int rank, int world_size, std::int64_t count, int, const Placement&) {
  Schedule s{rank, world_size, count, {}};
  Round& round = s.AddRound("broken");
  if (rank == 0) s.Send(round, 1, 0, count);
  if (rank == 1) s.RecvCopy(round, 0, 0, count);
  s.AddRound("broken");
  if (rank == 1) s.RecvCopy(s.rounds.back(), 0, 0, count);
  return s;
}

TEST(ScheduleSimulationTest, SchedulesThatDoNotMatchAreAnErrorNotAHang) {
  Collective broken = *FindCollective("ring");
  broken.builder = &Unmatched;
  absl::StatusOr<SimResult> result = SimulateSchedule(broken, 2, 64, 4, Flat(2));
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), testing::HasSubstr("rank 1 waits forever in round 1"));
}

TEST(ParameterServerSimulationTest, OnDedicatedShardsItIsTheCostModelsBytePSBound) {
  // k dedicated shards at the workers' rate: the model's two rounds, N first
  // chunks in, then N M / k in and out at once (allreduce/cost_model.h).
  for (int k : {1, 2, 4}) {
    const int n = 4;
    const std::int64_t bytes = std::int64_t{16} << 20;
    SimSetup setup = Flat(n);
    setup.sites.server_bps = kRate;
    const CostEstimate model = EstimateParameterServerOnFabric(n, k, bytes, 4, kAlpha,
                                                               setup.placement, setup.rates,
                                                               setup.sites);
    absl::StatusOr<SimResult> sim = SimulateParameterServer(n, k, bytes, 4, setup);
    ASSERT_TRUE(sim.ok()) << sim.status();
    EXPECT_NEAR(Slowest(*sim), model.time_s, model.time_s * 1e-9) << "k = " << k;
    EXPECT_EQ(sim->ranks[0].shard_bytes.size(), static_cast<std::size_t>(k));
    EXPECT_EQ(sim->ranks[0].shard_bytes[0], 2 * bytes / k);
  }
}

TEST(ParameterServerSimulationTest, WithAsManyShardsAsWorkersItBeatsTheRingAsBytePSSays) {
  // BytePS: max(M/B, N M/(k B)) = M/B against the ring's 2(N-1)/N M/B, 1.5x
  // at N = 4, less the first chunks' round: (M + N chunk)/B, 96/68 at 64 MiB.
  const int n = 4;
  const std::int64_t bytes = std::int64_t{64} << 20;
  SimSetup setup = Flat(n);
  setup.sites.server_bps = kRate;
  absl::StatusOr<SimResult> ps = SimulateParameterServer(n, n, bytes, 4, setup);
  ASSERT_TRUE(ps.ok()) << ps.status();
  const double ring = Simulated("ring", n, bytes, setup);
  EXPECT_NEAR(ring / Slowest(*ps), 96.0 / 68.0, 1e-3);
}

TEST(ParameterServerSimulationTest, AColocatedShardsOwnWorkerMovesNothingOnTheWire) {
  // One colocated shard on worker 0's host: the other three push through its
  // link, worker 0's push crosses no link and takes only alpha.
  const int n = 4;
  const std::int64_t bytes = std::int64_t{4} << 20;
  SimSetup setup = Flat(n);
  setup.sites.colocated = true;
  absl::StatusOr<SimResult> ps = SimulateParameterServer(n, 1, bytes, 4, setup);
  ASSERT_TRUE(ps.ok()) << ps.status();
  const double three_in = 3 * static_cast<double>(bytes) / kBytesPerS;
  EXPECT_GT(Slowest(*ps), three_in);
  EXPECT_LT(Slowest(*ps), 4 * static_cast<double>(bytes) / kBytesPerS);
}

}  // namespace
}  // namespace testbed
