// Collectives at the same time on one fabric (allreduce/simulator/
// concurrent_collectives.h): one alone takes the time SimulateSchedule gives
// it, over every scheduled collective, in groups and on racks; two that
// cross the same links share them max-min fairly, and two on links of their
// own do not slow each other; one that starts later shares only while both
// run; timers and collectives with nothing to move come back with their tags.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "allreduce/collective.h"
#include "allreduce/rank_groups.h"
#include "allreduce/simulator/concurrent_collectives.h"
#include "allreduce/simulator/simulation.h"

namespace testbed {
namespace {

constexpr double kRate = 100e6;  // bytes/s of the host links

SimSetup Racks(int n, int racks, double uplink) {
  SimSetup setup;
  setup.rates.host_bps.assign(static_cast<std::size_t>(n), kRate);
  if (racks > 1) {
    setup.placement = Placement::Packed(std::vector<int>(static_cast<std::size_t>(racks), n / racks));
    setup.rates.uplink_bps.assign(static_cast<std::size_t>(racks), uplink);
  }
  setup.alpha_s = 20e-6;
  return setup;
}

double Slowest(const SimResult& result) {
  double t = 0;
  for (const SimRank& r : result.ranks) t = std::max(t, r.time_s);
  return t;
}

// Plays what `start` starts on `clock` to the end; the tags' end times.
std::vector<double> EndTimes(ConcurrentCollectives& clock, int tags) {
  std::vector<double> ends(static_cast<std::size_t>(tags), -1);
  std::vector<std::uint64_t> ended;
  for (;;) {
    absl::StatusOr<bool> more = clock.Next(ended);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    for (std::uint64_t tag : ended) ends[tag] = clock.now();
    ended.clear();
  }
  return ends;
}

TEST(ConcurrentCollectivesTest, OneAloneTakesWhatSimulateScheduleGivesIt) {
  for (const Collective& entry : AllCollectives()) {
    const Collective* collective = &entry;
    if (!collective->has_schedule()) continue;
    for (const char* split : {"div:8", "div:4", "mod:2"}) {
      SimSetup setup = Racks(8, 2, kRate);
      const RankGroups groups = *ParseSplit(split, 8);
      setup.groups = groups;
      const std::int64_t bytes = 4 * 1000;
      absl::StatusOr<SimResult> alone = SimulateSchedule(*collective, 8, bytes, 4, setup);
      ASSERT_TRUE(alone.ok()) << alone.status();
      ConcurrentCollectives clock(8, setup);
      ASSERT_TRUE(clock.Start(*collective, bytes, 4, groups, 0, 0).ok());
      const std::vector<double> ends = EndTimes(clock, 1);
      EXPECT_NEAR(ends[0], Slowest(*alone), 1e-12) << collective->name << " " << split;
    }
  }
}

// A ring of 4 MiB in `groups` alone on `fabric`, its slowest rank's time.
double RingAlone(SimSetup fabric, const RankGroups& groups) {
  fabric.groups = groups;
  return Slowest(*SimulateSchedule(*FindCollective("ring"), fabric.groups.world_size(),
                                   std::int64_t{4} << 20, 4, fabric));
}

// Rings of 4 MiB in `a` and in `b` started together on `fabric`: when each ended.
std::vector<double> RingsTogether(const SimSetup& fabric, const RankGroups& a, const RankGroups& b) {
  const Collective& ring = *FindCollective("ring");
  ConcurrentCollectives clock(a.world_size(), fabric);
  EXPECT_TRUE(clock.Start(ring, std::int64_t{4} << 20, 4, a, 0, 0).ok());
  EXPECT_TRUE(clock.Start(ring, std::int64_t{4} << 20, 4, b, 0, 1).ok());
  return EndTimes(clock, 2);
}

TEST(ConcurrentCollectivesTest, TwoOnTheSameLinksShareThemAndTwoOnTheirOwnDoNot) {
  SimSetup flat = Racks(8, 1, 0);
  flat.alpha_s = 0;
  SimSetup racks = Racks(8, 2, kRate);
  racks.alpha_s = 0;
  const RankGroups world = RankGroups::World(8);
  const RankGroups evens = *GroupsOfMembers({{0, 2, 4, 6}}, 8);
  const RankGroups odds = *GroupsOfMembers({{1, 3, 5, 7}}, 8);
  const RankGroups first = *GroupsOfMembers({{0, 1, 2, 3}}, 8);
  const RankGroups second = *GroupsOfMembers({{4, 5, 6, 7}}, 8);
  struct Case {
    const char* what;
    const SimSetup& fabric;
    const RankGroups& a;
    const RankGroups& b;
    double slowdown;  // of each, against `a` alone
  };
  for (const Case& c : {
           // The same ring twice: every host link carries two flows each round.
           Case{"the same ring twice", flat, world, world, 2},
           // Each ring across two racks behind 4:1 uplinks crosses each uplink
           // once per direction a round: together, two flows on each.
           Case{"two rings across racks", racks, evens, odds, 2},
           // Disjoint groups on a switch: nothing shared.
           Case{"two rings on links of their own", flat, first, second, 1},
       }) {
    const double alone = RingAlone(c.fabric, c.a);
    const std::vector<double> ends = RingsTogether(c.fabric, c.a, c.b);
    EXPECT_NEAR(ends[0], c.slowdown * alone, 1e-9 * alone) << c.what;
    EXPECT_NEAR(ends[1], c.slowdown * alone, 1e-9 * alone) << c.what;
  }
}

TEST(ConcurrentCollectivesTest, OneStartedLaterSharesOnlyWhileBothRun) {
  const Collective& ring = *FindCollective("ring");
  const std::int64_t bytes = std::int64_t{4} << 20;
  SimSetup flat = Racks(4, 1, 0);
  flat.alpha_s = 0;
  const RankGroups world = RankGroups::World(4);
  const double alone = Slowest(*SimulateSchedule(ring, 4, bytes, 4, flat));
  ConcurrentCollectives clock(4, flat);
  ASSERT_TRUE(clock.Start(ring, bytes, 4, world, 0, 0).ok());
  clock.Wake(alone / 2, 7);
  std::vector<std::uint64_t> ended;
  ASSERT_TRUE(*clock.Next(ended));
  ASSERT_EQ(ended, std::vector<std::uint64_t>{7});
  EXPECT_DOUBLE_EQ(clock.now(), alone / 2);
  ASSERT_TRUE(clock.Start(ring, bytes, 4, world, 0, 1).ok());
  const std::vector<double> ends = EndTimes(clock, 2);
  // The first ring's second half at half speed, then the second ring's rest alone.
  EXPECT_GT(ends[0], 1.3 * alone);
  EXPECT_LT(ends[0], 1.6 * alone);
  EXPECT_GT(ends[1], ends[0]);
  EXPECT_NEAR(ends[1], 2 * alone, 0.1 * alone);
}

TEST(ConcurrentCollectivesTest, NothingToMoveEndsAtOnceAndBadInputIsRefused) {
  const Collective& ring = *FindCollective("ring");
  const SimSetup flat = Racks(4, 1, 0);
  const RankGroups singles = *GroupsOfMembers({}, 4);
  ConcurrentCollectives clock(4, flat);
  ASSERT_TRUE(clock.Start(ring, 4000, 4, singles, 0, 3).ok());
  std::vector<std::uint64_t> ended;
  ASSERT_TRUE(*clock.Next(ended));
  EXPECT_EQ(ended, std::vector<std::uint64_t>{3});
  EXPECT_EQ(clock.now(), 0);
  EXPECT_FALSE(clock.Start(ring, 4001, 4, singles, 0, 0).ok());
  EXPECT_FALSE(clock.Start(ring, 4000, 4, RankGroups::World(8), 0, 0).ok());
  EXPECT_FALSE(*clock.Next(ended));
}

}  // namespace
}  // namespace testbed
