// Schedules as data: hand-checked steps for small cases, every rank's schedule
// consistent with every other's, and the traffic read off schedules equal to
// the closed forms for world sizes far beyond what the run tests reach.
#include <gtest/gtest.h>

#include "allreduce/chunking.h"
#include "allreduce/collective.h"
#include "allreduce/collectives.h"
#include "allreduce/schedule.h"
#include "allreduce/traffic.h"

namespace testbed {
namespace {

Step Send(int peer, std::int64_t offset, std::int64_t count) {
  return {StepKind::kSend, peer, offset, count};
}
Step Reduce(int peer, std::int64_t offset, std::int64_t count) {
  return {StepKind::kRecvReduce, peer, offset, count};
}
Step Copy(int peer, std::int64_t offset, std::int64_t count) {
  return {StepKind::kRecvCopy, peer, offset, count};
}

TEST(ChunkingTest, ChunksCoverTheVectorAndDifferByAtMostOne) {
  for (std::int64_t count : {0, 1, 7, 8, 100, 1000003}) {
    for (int parts = 1; parts <= 17; ++parts) {
      std::int64_t next = 0;
      for (int i = 0; i < parts; ++i) {
        const Chunk c = ChunkOf(count, parts, i);
        EXPECT_EQ(c.offset, next);
        EXPECT_LE(c.count, count / parts + 1);
        EXPECT_GE(c.count, count / parts);
        if (c.count > 0) {
          EXPECT_EQ(ChunkOwner(count, parts, c.offset), i);
          EXPECT_EQ(ChunkOwner(count, parts, c.offset + c.count - 1), i);
        }
        next += c.count;
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(ScheduleTest, RingFourRanksEightElements) {
  const Schedule s = BuildAllReduceRing(0, 4, 8);
  ASSERT_EQ(s.rounds.size(), 6u);
  // Reduce-scatter: rank 0 sends chunk 3, 2, 1 to rank 1 and reduces 2, 1, 0 from rank 3.
  EXPECT_EQ(s.rounds[0].steps, (std::vector<Step>{Send(1, 6, 2), Reduce(3, 4, 2)}));
  EXPECT_EQ(s.rounds[1].steps, (std::vector<Step>{Send(1, 4, 2), Reduce(3, 2, 2)}));
  EXPECT_EQ(s.rounds[2].steps, (std::vector<Step>{Send(1, 2, 2), Reduce(3, 0, 2)}));
  // All-gather: rank 0 forwards chunk 0, 3, 2 and stores 3, 2, 1.
  EXPECT_EQ(s.rounds[3].steps, (std::vector<Step>{Send(1, 0, 2), Copy(3, 6, 2)}));
  EXPECT_EQ(s.rounds[4].steps, (std::vector<Step>{Send(1, 6, 2), Copy(3, 4, 2)}));
  EXPECT_EQ(s.rounds[5].steps, (std::vector<Step>{Send(1, 4, 2), Copy(3, 2, 2)}));
  EXPECT_EQ(s.rounds[0].phase, "reduce-scatter");
  EXPECT_EQ(s.rounds[5].phase, "all-gather");
}

TEST(ScheduleTest, ButterflySixRanksFoldsTwoExtraRanks) {
  // p = 4, r = 2: ranks 0 and 2 fold into 1 and 3; actives 1, 3, 4, 5.
  const Schedule r0 = BuildAllReduceButterfly(0, 6, 10);
  ASSERT_EQ(r0.rounds.size(), 4u);
  EXPECT_EQ(r0.rounds[0].steps, (std::vector<Step>{Send(1, 0, 10)}));
  EXPECT_TRUE(r0.rounds[1].steps.empty());
  EXPECT_TRUE(r0.rounds[2].steps.empty());
  EXPECT_EQ(r0.rounds[3].steps, (std::vector<Step>{Copy(1, 0, 10)}));

  const Schedule r1 = BuildAllReduceButterfly(1, 6, 10);
  EXPECT_EQ(r1.rounds[0].steps, (std::vector<Step>{Reduce(0, 0, 10)}));
  EXPECT_EQ(r1.rounds[1].steps, (std::vector<Step>{Send(3, 0, 10), Reduce(3, 0, 10)}));
  EXPECT_EQ(r1.rounds[2].steps, (std::vector<Step>{Send(4, 0, 10), Reduce(4, 0, 10)}));
  EXPECT_EQ(r1.rounds[3].steps, (std::vector<Step>{Send(0, 0, 10)}));

  const Schedule r5 = BuildAllReduceButterfly(5, 6, 10);
  EXPECT_TRUE(r5.rounds[0].steps.empty());
  EXPECT_EQ(r5.rounds[1].steps, (std::vector<Step>{Send(4, 0, 10), Reduce(4, 0, 10)}));
  EXPECT_EQ(r5.rounds[2].steps, (std::vector<Step>{Send(3, 0, 10), Reduce(3, 0, 10)}));
  EXPECT_TRUE(r5.rounds[3].steps.empty());
}

TEST(ScheduleTest, HalvingDoublingSixRanksTenElements) {
  // p = 4, r = 2: ranks 0 and 2 fold into 1 and 3; actives 1, 3, 4, 5 hold
  // chunks 0..3 of 10 elements: offsets 0, 3, 6, 8, sizes 3, 3, 2, 2.
  const Schedule r0 = BuildAllReduceHalvingDoubling(0, 6, 10);
  ASSERT_EQ(r0.rounds.size(), 6u);
  EXPECT_EQ(r0.rounds[0].steps, (std::vector<Step>{Send(1, 0, 10)}));
  for (int k = 1; k <= 4; ++k) EXPECT_TRUE(r0.rounds[k].steps.empty()) << k;
  EXPECT_EQ(r0.rounds[5].steps, (std::vector<Step>{Copy(1, 0, 10)}));

  // Active 0: halving with active 2 (rank 4) over chunks 0-3, then with active
  // 1 (rank 3) over chunks 0-1; doubling back in reverse order.
  const Schedule r1 = BuildAllReduceHalvingDoubling(1, 6, 10);
  ASSERT_EQ(r1.rounds.size(), 6u);
  EXPECT_EQ(r1.rounds[0].steps, (std::vector<Step>{Reduce(0, 0, 10)}));
  EXPECT_EQ(r1.rounds[1].steps, (std::vector<Step>{Send(4, 6, 4), Reduce(4, 0, 6)}));
  EXPECT_EQ(r1.rounds[2].steps, (std::vector<Step>{Send(3, 3, 3), Reduce(3, 0, 3)}));
  EXPECT_EQ(r1.rounds[3].steps, (std::vector<Step>{Send(3, 0, 3), Copy(3, 3, 3)}));
  EXPECT_EQ(r1.rounds[4].steps, (std::vector<Step>{Send(4, 0, 6), Copy(4, 6, 4)}));
  EXPECT_EQ(r1.rounds[5].steps, (std::vector<Step>{Send(0, 0, 10)}));

  // Active 3 keeps the upper halves and ends the reduce-scatter with chunk 3.
  const Schedule r5 = BuildAllReduceHalvingDoubling(5, 6, 10);
  EXPECT_TRUE(r5.rounds[0].steps.empty());
  EXPECT_EQ(r5.rounds[1].steps, (std::vector<Step>{Send(3, 0, 6), Reduce(3, 6, 4)}));
  EXPECT_EQ(r5.rounds[2].steps, (std::vector<Step>{Send(4, 6, 2), Reduce(4, 8, 2)}));
  EXPECT_EQ(r5.rounds[3].steps, (std::vector<Step>{Send(4, 8, 2), Copy(4, 6, 2)}));
  EXPECT_EQ(r5.rounds[4].steps, (std::vector<Step>{Send(3, 6, 4), Copy(3, 0, 6)}));
  EXPECT_TRUE(r5.rounds[5].steps.empty());
  EXPECT_EQ(r5.rounds[1].phase, "reduce-scatter");
  EXPECT_EQ(r5.rounds[4].phase, "all-gather");
}

TEST(ScheduleTest, TreeFiveRanks) {
  // Reduce: 1->0 and 3->2, then 2->0, then 4->0. Broadcast: 0->4, 0->2, then 0->1 and 2->3.
  const Schedule r0 = BuildAllReduceTree(0, 5, 3);
  ASSERT_EQ(r0.rounds.size(), 6u);
  EXPECT_EQ(r0.rounds[0].steps, (std::vector<Step>{Reduce(1, 0, 3)}));
  EXPECT_EQ(r0.rounds[1].steps, (std::vector<Step>{Reduce(2, 0, 3)}));
  EXPECT_EQ(r0.rounds[2].steps, (std::vector<Step>{Reduce(4, 0, 3)}));
  EXPECT_EQ(r0.rounds[3].steps, (std::vector<Step>{Send(4, 0, 3)}));
  EXPECT_EQ(r0.rounds[4].steps, (std::vector<Step>{Send(2, 0, 3)}));
  EXPECT_EQ(r0.rounds[5].steps, (std::vector<Step>{Send(1, 0, 3)}));
  const Schedule r3 = BuildAllReduceTree(3, 5, 3);
  EXPECT_EQ(r3.rounds[0].steps, (std::vector<Step>{Send(2, 0, 3)}));
  EXPECT_EQ(r3.rounds[5].steps, (std::vector<Step>{Copy(2, 0, 3)}));
}

TEST(ScheduleTest, TreeWithRootTwoRenumbersRelativeToTheRoot) {
  // N = 4, root 2: relative ranks 0..3 are real ranks 2, 3, 0, 1.
  EXPECT_EQ(BuildReduceTree(3, 4, 1, 2).rounds[0].steps, (std::vector<Step>{Send(2, 0, 1)}));
  EXPECT_EQ(BuildReduceTree(1, 4, 1, 2).rounds[0].steps, (std::vector<Step>{Send(0, 0, 1)}));
  EXPECT_EQ(BuildReduceTree(0, 4, 1, 2).rounds[1].steps, (std::vector<Step>{Send(2, 0, 1)}));
  EXPECT_EQ(BuildReduceTree(2, 4, 1, 2).rounds[1].steps, (std::vector<Step>{Reduce(0, 0, 1)}));
}

TEST(ScheduleTest, ZeroElementStepsAreDroppedButRoundsRemain) {
  const Schedule s = BuildAllReduceRing(0, 4, 0);
  EXPECT_EQ(s.rounds.size(), 6u);
  for (const Round& round : s.rounds) EXPECT_TRUE(round.steps.empty());
}

TEST(ScheduleTest, EveryCollectiveMatchesAcrossRanks) {
  for (const Collective* scheduled : CollectivesOf(Kinds::kScheduled)) {
    const Collective& c = *scheduled;
    for (int n = 1; n <= 33; ++n) {
      for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{n - 1},
                                 std::int64_t{n + 1}, std::int64_t{97}}) {
        for (int root : {0, n / 2, n - 1}) {
          std::vector<Schedule> all;
          for (int r = 0; r < n; ++r) all.push_back(c.Build(r, n, count, root));
          const absl::Status st = ValidateMatching(all);
          EXPECT_TRUE(st.ok()) << c.name << " N=" << n << " count=" << count << ": " << st;
        }
      }
    }
  }
}

TEST(TrafficTest, CountedFromSchedulesEqualsClosedFormUpToSixtyFourRanks) {
  for (const Collective* scheduled : CollectivesOf(Kinds::kScheduled)) {
    const Collective& c = *scheduled;
    for (int n = 1; n <= 64; ++n) {
      for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{n + 3},
                                 std::int64_t{12345}}) {
        const TrafficSummary t = CountTraffic(c, n, count * 4, 4);
        EXPECT_EQ(t.total_bytes, c.formula_bytes(n, count * 4))
            << c.name << " N=" << n << " count=" << count;
        EXPECT_EQ(t.rounds, c.formula_rounds(n)) << c.name << " N=" << n;
      }
    }
  }
}

// Halving-doubling's chunks are uneven whenever p does not divide the count;
// the total must still be exactly 2(N-1) elements per element of the vector,
// counted here from the schedules independently of the registry's function.
TEST(TrafficTest, HalvingDoublingMovesExactlyTwiceNMinusOneVectorsForAnyCount) {
  const Collective& hd = *FindCollective("halving-doubling");
  for (int n = 1; n <= 33; ++n) {
    for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{n - 1},
                               std::int64_t{n + 1}, std::int64_t{1000003}}) {
      for (std::int64_t element_size : {1, 4, 8}) {
        const std::int64_t bytes = count * element_size;
        const TrafficSummary t = CountTraffic(hd, n, bytes, element_size);
        EXPECT_EQ(t.total_bytes, 2 * std::int64_t{n - 1} * bytes)
            << "N=" << n << " count=" << count << " element_size=" << element_size;
        EXPECT_EQ(t.total_bytes, hd.formula_bytes(n, bytes)) << "N=" << n << " count=" << count;
        EXPECT_EQ(t.rounds, hd.formula_rounds(n)) << "N=" << n;
      }
    }
  }
}

TEST(TrafficTest, ClosedFormsAtEightRanks) {
  const std::int64_t m = 64 << 20;
  EXPECT_EQ(FindCollective("naive")->formula_bytes(8, m), 56 * m);
  EXPECT_EQ(FindCollective("ring")->formula_bytes(8, m), 14 * m);
  EXPECT_EQ(FindCollective("tree")->formula_bytes(8, m), 14 * m);
  EXPECT_EQ(FindCollective("butterfly")->formula_bytes(8, m), 24 * m);
  // N = 6: p = 4, r = 2: 4 M 2 + 2 2 M.
  EXPECT_EQ(FindCollective("butterfly")->formula_bytes(6, m), 12 * m);
  EXPECT_EQ(FindCollective("butterfly")->formula_rounds(6), 4);
  // Halving-doubling moves what ring moves, in 2 log2 p (+2) rounds.
  EXPECT_EQ(FindCollective("halving-doubling")->formula_bytes(8, m), 14 * m);
  EXPECT_EQ(FindCollective("halving-doubling")->formula_bytes(6, m), 10 * m);
  EXPECT_EQ(FindCollective("halving-doubling")->formula_rounds(8), 6);
  EXPECT_EQ(FindCollective("halving-doubling")->formula_rounds(6), 6);
  EXPECT_EQ(FindCollective("halving-doubling")->formula_rounds(1), 0);
  EXPECT_EQ(FindCollective("tree")->formula_rounds(5), 6);
}

TEST(TrafficTest, BusiestRankOfTheTreeIsTheRoot) {
  // N = 8: the root receives 3 vectors up and sends 3 down; a ring rank moves 2(N-1)/N M.
  const TrafficSummary tree = CountTraffic(*FindCollective("tree"), 8, 800, 4);
  EXPECT_EQ(tree.max_rank_bytes, 3 * 800);
  const TrafficSummary ring = CountTraffic(*FindCollective("ring"), 8, 800, 4);
  EXPECT_EQ(ring.max_rank_bytes, 2 * 7 * 100);
}

TEST(TrafficTest, BusiestRankOfHalvingDoubling) {
  // At N = 8 loads every link like the ring: 2(p-1)/p M.
  const TrafficSummary hd8 = CountTraffic(*FindCollective("halving-doubling"), 8, 800, 4);
  EXPECT_EQ(hd8.max_rank_bytes, 2 * 7 * 100);
  // At N = 6 a fold partner also carries the whole vector in (fold) and out (unfold).
  const TrafficSummary hd6 = CountTraffic(*FindCollective("halving-doubling"), 6, 800, 4);
  EXPECT_EQ(hd6.max_rank_bytes, 2 * 3 * 200 + 800);
}

TEST(ValidateTest, RejectsBadSchedules) {
  Schedule s{0, 2, 4, {}};
  Round& round = s.AddRound("test");
  s.Send(round, 2, 0, 1);
  EXPECT_FALSE(Validate(s).ok());  // no rank 2

  Schedule self{0, 2, 4, {}};
  self.Send(self.AddRound("test"), 0, 0, 1);
  EXPECT_FALSE(Validate(self).ok());

  Schedule outside{0, 2, 4, {}};
  outside.RecvReduce(outside.AddRound("test"), 1, 3, 2);
  EXPECT_FALSE(Validate(outside).ok());

  Schedule twice{0, 2, 4, {}};
  Round& r = twice.AddRound("test");
  twice.Send(r, 1, 0, 1);
  twice.Send(r, 1, 1, 1);
  EXPECT_FALSE(Validate(twice).ok());
}

TEST(ValidateTest, RejectsUnmatchedSends) {
  Schedule a{0, 2, 4, {}};
  a.Send(a.AddRound("test"), 1, 0, 4);
  Schedule b{1, 2, 4, {}};
  b.RecvCopy(b.AddRound("test"), 0, 0, 3);
  EXPECT_FALSE(ValidateMatching({a, b}).ok());
  Schedule c{1, 2, 4, {}};
  c.AddRound("test");
  EXPECT_FALSE(ValidateMatching({a, c}).ok());
}

}  // namespace
}  // namespace testbed
