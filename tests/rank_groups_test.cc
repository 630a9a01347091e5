// Groups of ranks (allreduce/rank_groups.h): nccl-tests' DIV and MOD splits;
// every scheduled collective built in its group fits together over the whole
// world and names no rank outside the group; groups run at once on the
// in-process transport give each group its own exact result and the group's
// closed-form traffic; and in the simulator groups inside racks run as fast
// as alone while groups across racks share the uplinks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "allreduce/collective.h"
#include "allreduce/inprocess_run.h"
#include "allreduce/rank_groups.h"
#include "allreduce/simulator/simulation.h"
#include "allreduce/traffic.h"

namespace testbed {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RankGroupsTest, DivMakesBlocksAndModDealsRanksAsNcclTestsSplitDoes) {
  const RankGroups blocks = *SplitRanks(8, SplitKind::kDiv, 4);
  EXPECT_THAT(blocks.members, ElementsAre(ElementsAre(0, 1, 2, 3), ElementsAre(4, 5, 6, 7)));
  const RankGroups dealt = *SplitRanks(8, SplitKind::kMod, 2);
  EXPECT_THAT(dealt.members, ElementsAre(ElementsAre(0, 2, 4, 6), ElementsAre(1, 3, 5, 7)));
  EXPECT_EQ(dealt.index_in_group[5], 2);
  EXPECT_EQ(dealt.group_of_rank[5], 1);
  const RankGroups uneven = *SplitRanks(7, SplitKind::kDiv, 3);
  EXPECT_THAT(uneven.members, ElementsAre(ElementsAre(0, 1, 2), ElementsAre(3, 4, 5), ElementsAre(6)));
  EXPECT_THAT(ParseSplit("mod:4", 8)->members, ::testing::SizeIs(4));
  for (const char* bad : {"div", "div:", "div:0", "div:9", "and:4", "mod:x", "mod:4x"}) {
    EXPECT_FALSE(ParseSplit(bad, 8).ok()) << bad;
  }
  EXPECT_THAT(std::string(ParseSplit("div:9", 8).status().message()), HasSubstr("1..8"));
}

TEST(RankGroupsTest, GroupsGivenByTheirMembersLeaveTheOthersAloneAndReadBack) {
  // A trace's communicator: pairs four apart, ranks 2 and 6 in none.
  const RankGroups pairs = *ParseSplit("groups:4,0/1,5/3,7", 8);
  EXPECT_THAT(pairs.members, ElementsAre(ElementsAre(0, 4), ElementsAre(1, 5), ElementsAre(3, 7),
                                         ElementsAre(2), ElementsAre(6)));
  EXPECT_EQ(pairs.index_in_group[4], 1);
  EXPECT_EQ(SplitText(pairs), "groups:0,4/1,5/3,7");
  EXPECT_EQ(ParseSplit(SplitText(pairs), 8)->members, pairs.members);
  EXPECT_EQ(SplitText(*ParseSplit("div:4", 8)), "groups:0,1,2,3/4,5,6,7");
  for (const char* bad : {"groups:0,8", "groups:0,1/1,2", "groups:0,,1", "groups:a", "groups:-1,0"}) {
    EXPECT_FALSE(ParseSplit(bad, 8).ok()) << bad;
  }
  EXPECT_THAT(std::string(ParseSplit("groups:0,1/1,2", 8).status().message()),
              HasSubstr("rank 1 is in two groups"));
}

TEST(RankGroupsTest, AGroupsPlacementIsItsMembersRacksRenumbered) {
  const Placement world = Placement::Packed({4, 4});
  EXPECT_THAT(GroupPlacement(world, {5, 6}).rack_of_rank, ElementsAre(0, 0));
  EXPECT_THAT(GroupPlacement(world, {1, 5, 2}).rack_of_rank, ElementsAre(0, 1, 0));
  EXPECT_TRUE(GroupPlacement(Placement::Flat(), {1, 2}).rack_of_rank.empty());
}

// The world schedules of one group's members with the group's own rank
// numbers, for ValidateMatching: every send met by its receive in the group.
std::vector<Schedule> AsGroup(const std::vector<Schedule>& world, const std::vector<int>& members) {
  std::vector<Schedule> group;
  for (std::size_t i = 0; i < members.size(); ++i) {
    Schedule s = world[static_cast<std::size_t>(members[i])];
    s.rank = static_cast<int>(i);
    s.world_size = static_cast<int>(members.size());
    for (Round& round : s.rounds) {
      for (Step& step : round.steps) {
        step.peer = static_cast<int>(std::find(members.begin(), members.end(), step.peer) -
                                     members.begin());
      }
    }
    group.push_back(std::move(s));
  }
  return group;
}

TEST(RankGroupsTest, EveryCollectiveInGroupsFitsTogetherAndStaysInsideItsGroup) {
  for (const Collective* collective : CollectivesOf(Kinds::kScheduled)) {
    for (int n = 1; n <= 9; ++n) {
      for (SplitKind kind : {SplitKind::kDiv, SplitKind::kMod}) {
        for (int k = 1; k <= n; ++k) {
          const RankGroups groups = *SplitRanks(n, kind, k);
          const Placement racks = n % 2 == 0 ? Placement::Packed({n / 2, n / 2}) : Placement::Flat();
          std::vector<Schedule> all;
          for (int r = 0; r < n; ++r) {
            all.push_back(BuildInGroup(*collective, groups, r, 37, 0, racks));
            ASSERT_TRUE(Validate(all.back()).ok()) << collective->name << " N " << n << " k " << k;
            const std::vector<int>& mine = groups.GroupOf(r);
            for (const Round& round : all.back().rounds) {
              for (const Step& step : round.steps) {
                EXPECT_TRUE(std::find(mine.begin(), mine.end(), step.peer) != mine.end())
                    << collective->name << " rank " << r << " talks to " << step.peer;
              }
            }
          }
          for (const std::vector<int>& members : groups.members) {
            const absl::Status matching = ValidateMatching(AsGroup(all, members));
            EXPECT_TRUE(matching.ok())
                << collective->name << " N " << n << " k " << k << ": " << matching;
          }
        }
      }
    }
  }
}

// Rank r's input: r + 1 in every element, so a group's sum is exact.
std::vector<Bytes> Inputs(int n, std::int64_t count) {
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) {
    std::vector<float> values(static_cast<std::size_t>(count), static_cast<float>(r + 1));
    Bytes& bytes = inputs.emplace_back(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
  }
  return inputs;
}

TEST(RankGroupsTest, GroupsRunAtOnceEachGettingItsOwnSumAndItsClosedFormTraffic) {
  const int n = 8;
  const std::int64_t count = 1000;
  for (const char* name : {"ring", "tree", "butterfly", "halving-doubling", "hierarchical"}) {
    for (const char* split : {"div:4", "mod:2", "mod:3"}) {
      const Collective& collective = *FindCollective(name);
      InProcessRunOptions options;
      options.groups = *ParseSplit(split, n);
      options.placement = Placement::Packed({4, 4});
      const InProcessRun run = RunInProcess(collective, Inputs(n, count), options);
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(run.status[r].ok()) << name << " " << split << ": " << run.status[r];
        float expected = 0;
        for (int member : options.groups.GroupOf(r)) expected += static_cast<float>(member + 1);
        std::vector<float> got(static_cast<std::size_t>(count));
        std::memcpy(got.data(), run.buffers[r].data(), run.buffers[r].size());
        EXPECT_THAT(got, ::testing::Each(expected)) << name << " " << split << " rank " << r;
        const std::vector<int>& members = options.groups.GroupOf(r);
        const TrafficSummary alone =
            CountTraffic(collective, static_cast<int>(members.size()), count * 4, 4, 0,
                         GroupPlacement(options.placement, members));
        std::int64_t sent = 0;
        for (const PeerTraffic& t : run.traffic[r]) sent += static_cast<std::int64_t>(t.bytes_sent);
        EXPECT_EQ(sent, alone.per_rank[options.groups.index_in_group[r]].bytes_sent)
            << name << " " << split << " rank " << r;
      }
    }
  }
}

TEST(RankGroupsTest, SimulatedGroupsInsideRacksRunAsFastAsAloneAndAcrossRacksShareTheUplinks) {
  constexpr double kRate = 100e6;
  const std::int64_t bytes = std::int64_t{4} << 20;
  SimSetup racks;
  racks.rates.host_bps.assign(8, kRate);
  racks.rates.uplink_bps = {kRate, kRate};  // 4 hosts behind each: 4:1
  racks.placement = Placement::Packed({4, 4});
  racks.alpha_s = 50e-6;
  SimSetup alone;
  alone.rates.host_bps.assign(4, kRate);
  alone.alpha_s = racks.alpha_s;
  const Collective& ring = *FindCollective("ring");
  const auto slowest = [](const SimResult& result) {
    double t = 0;
    for (const SimRank& r : result.ranks) t = std::max(t, r.time_s);
    return t;
  };
  const double one = slowest(*SimulateSchedule(ring, 4, bytes, 4, alone));
  racks.groups = *ParseSplit("div:4", 8);
  const double inside = slowest(*SimulateSchedule(ring, 8, bytes, 4, racks));
  racks.groups = *ParseSplit("mod:2", 8);
  const double across = slowest(*SimulateSchedule(ring, 8, bytes, 4, racks));
  EXPECT_NEAR(inside, one, one * 1e-9);
  // Across: each ring {0,2,4,6}, {1,3,5,7} crosses each uplink once per
  // direction a round, so the two share it: twice the time, less alpha's share.
  EXPECT_GT(across, 1.95 * inside);
  EXPECT_LT(across, 2 * inside);
  racks.groups = *ParseSplit("div:3", 7);
  EXPECT_FALSE(SimulateSchedule(ring, 8, bytes, 4, racks).ok());
}

}  // namespace
}  // namespace testbed
