// The segment plan on its own: how steps are cut, what each segment waits
// for (only what overlaps it, so round k+1 need not wait for all of round k),
// and the segment sizes `--segment auto` picks.
#include <gtest/gtest.h>

#include <algorithm>

#include "allreduce/collectives.h"
#include "allreduce/executor.h"
#include "allreduce/segment_plan.h"

namespace testbed {
namespace {

TEST(SegmentPlanTest, StepsAreCutIntoSegmentsCoveringThemExactly) {
  // Ring, N = 3, 10 elements: chunks of 4, 3, 3, cut into segments of 2.
  const Schedule schedule = BuildAllReduceRing(/*rank=*/1, 3, 10);
  const SegmentPlan plan = PlanSegments(schedule, 2);
  std::int64_t sent = 0, received = 0;
  for (const SegmentOp& op : plan.ops) {
    EXPECT_GT(op.count, 0);
    EXPECT_LE(op.count, 2);
    (op.IsReceive() ? received : sent) += op.count;
  }
  EXPECT_EQ(sent, schedule.ElementsSent());
  EXPECT_EQ(received, schedule.ElementsReceived());
  ASSERT_EQ(plan.receives_per_round.size(), schedule.rounds.size());
  EXPECT_EQ(static_cast<std::size_t>(plan.slot_elements) * sizeof(float),
            ScratchBytes(schedule, DataType::kFloat32));
}

TEST(SegmentPlanTest, ASegmentWaitsOnlyForTheSegmentsItOverlaps) {
  // Ring, N = 4, 64 elements: chunks of 16, segments of 4. In reduce-scatter
  // round 1 a rank sends the chunk it reduced in round 0; each of that send's
  // segments waits for the one receive segment that wrote its range, not for
  // the whole round.
  const Schedule schedule = BuildAllReduceRing(/*rank=*/0, 4, 64);
  const SegmentPlan plan = PlanSegments(schedule, 4);
  int checked = 0;
  for (std::uint32_t id = 0; id < plan.ops.size(); ++id) {
    const SegmentOp& op = plan.ops[id];
    if (op.round != 1 || op.IsReceive()) continue;
    EXPECT_EQ(op.prerequisites, 1) << "segment " << op.segment;
    for (const SegmentOp& before : plan.ops) {
      const bool waits = std::count(before.dependents.begin(), before.dependents.end(), id) > 0;
      if (!waits) continue;
      EXPECT_EQ(before.round, 0u);
      EXPECT_TRUE(before.IsReceive());
      EXPECT_EQ(before.offset, op.offset);
      EXPECT_EQ(before.count, op.count);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(SegmentPlanTest, SendsToDifferentPeersKeepTheirRoundsOrderSegmentBySegment) {
  // Tree, N = 4: the root broadcasts to rank 2 in one round and to rank 1 in
  // the next. Segment j of the second send waits for segment j of the first,
  // and for nothing else that is a send.
  const Schedule schedule = BuildAllReduceTree(/*rank=*/0, 4, 64);
  const SegmentPlan plan = PlanSegments(schedule, 8);
  std::vector<std::uint32_t> first, second;  // the two broadcast sends' segments
  for (std::uint32_t id = 0; id < plan.ops.size(); ++id) {
    const SegmentOp& op = plan.ops[id];
    if (op.IsReceive()) continue;
    (first.empty() || plan.ops[first.front()].round == op.round ? first : second).push_back(id);
  }
  ASSERT_EQ(first.size(), 8u);
  ASSERT_EQ(second.size(), 8u);
  ASSERT_NE(plan.ops[first.front()].peer, plan.ops[second.front()].peer);
  for (std::size_t j = 0; j < first.size(); ++j) {
    const std::vector<std::uint32_t>& waiting = plan.ops[first[j]].dependents;
    EXPECT_EQ(std::count(waiting.begin(), waiting.end(), second[j]), 1) << "segment " << j;
    for (std::size_t other = 0; other < second.size(); ++other) {
      if (other == j) continue;
      EXPECT_EQ(std::count(waiting.begin(), waiting.end(), second[other]), 0);
    }
  }
}

TEST(SegmentPlanTest, SegmentElementsAreWholeAndBounded) {
  EXPECT_EQ(SegmentElements(1 << 20, 4, 1 << 24), 1 << 18);
  EXPECT_EQ(SegmentElements(1000, 8, 1000), 125);
  EXPECT_EQ(SegmentElements(4, 8, 1000), 1);  // less than an element: one
  // No step may need more segments than the tag has room for.
  EXPECT_EQ(SegmentElements(4, 4, kMaxSegmentsPerStep * 3), 3);
}

TEST(SegmentPlanTest, AutoCutsOnlyLargeMessagesIntoSixteenthsWithinBounds) {
  EXPECT_EQ(AutoSegmentBytes(0), 0u);
  EXPECT_EQ(AutoSegmentBytes((4 << 20) - 4), 0u);
  EXPECT_EQ(AutoSegmentBytes(4 << 20), std::size_t{256} << 10);
  EXPECT_EQ(AutoSegmentBytes(16 << 20), std::size_t{1} << 20);
  EXPECT_EQ(AutoSegmentBytes(std::int64_t{1} << 30), std::size_t{4} << 20);
}

}  // namespace
}  // namespace testbed
