// Hierarchical all-reduce and placement-aware traffic: world sizes 1-64 x rack
// shapes (flat, two racks, racks of four, unequal racks, one-rank racks,
// round-robin placement) x odd counts. Every shape's schedules fit together,
// move 2(N-1)M in total and exactly 2(R-1)M across racks; in process they give
// the exact sum in every data type. The uplink counts of the fabric
// (2 racks x 4, 4 MiB) equal their closed forms: hierarchical M per uplink and
// direction, a rack-order ring 2(N-1)/N M, a round-robin ring 4 times that.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "allreduce/collective.h"
#include "allreduce/collectives.h"
#include "allreduce/expected_values.h"
#include "allreduce/inprocess_run.h"
#include "allreduce/traffic.h"

namespace testbed {
namespace {

struct Shape {
  std::string name;
  Placement placement;
};

// Rack sizes of `size` each, the last one smaller when `n` is not a multiple.
std::vector<int> RacksOf(int n, int size) {
  std::vector<int> sizes;
  for (int left = n; left > 0; left -= size) sizes.push_back(std::min(size, left));
  return sizes;
}

std::vector<Shape> ShapesFor(int n) {
  std::vector<Shape> shapes{{"flat", Placement::Flat()}};
  if (n >= 2) {
    shapes.push_back({"two racks", Placement::Packed({n / 2, n - n / 2})});
    shapes.push_back({"one and the rest", Placement::Packed({1, n - 1})});
    shapes.push_back({"racks of four", Placement::Packed(RacksOf(n, 4))});
    shapes.push_back({"one rank per rack", Placement::Packed(RacksOf(n, 1))});
    shapes.push_back({"round-robin, racks of three", Placement::RoundRobin(RacksOf(n, 3))});
    std::vector<int> growing;  // 1, 2, 3, ... until n is used up
    for (int size = 1, left = n; left > 0; left -= size, ++size) {
      growing.push_back(std::min(size, left));
    }
    shapes.push_back({"racks of 1, 2, 3...", Placement::Packed(growing)});
  }
  return shapes;
}

const Collective& Hierarchical() { return *FindCollective("hierarchical"); }

TEST(Placement, PackedAndRoundRobinPlaceEveryRankOnce) {
  EXPECT_EQ(Placement::Packed({2, 3}).rack_of_rank, (std::vector<int>{0, 0, 1, 1, 1}));
  EXPECT_EQ(Placement::RoundRobin({2, 3}).rack_of_rank, (std::vector<int>{0, 1, 0, 1, 1}));
  EXPECT_EQ(Placement::Flat().Racks(7), 1);
  EXPECT_TRUE(ValidateRackPlacement(Placement::Packed({2, 3}), 5).ok());
}

TEST(Placement, AWrongLengthOrAnEmptyRackIsRefusedNamingIt) {
  EXPECT_EQ(ValidateRackPlacement(Placement::Packed({2, 3}), 4).message(),
            "the placement names racks for 5 ranks, but the collective has 4");
  EXPECT_EQ(ValidateRackPlacement(Placement{{0, 2, 2}}, 3).message(),
            "rack 1 holds no rank: number racks 0..2 densely");
}

TEST(Hierarchical, EveryRackShapeMatchesAndMovesTheClosedFormsAcrossRacks) {
  for (int n = 1; n <= 64; ++n) {
    for (const Shape& shape : ShapesFor(n)) {
      ASSERT_TRUE(ValidateRackPlacement(shape.placement, n).ok()) << shape.name << " N=" << n;
      const int racks = shape.placement.Racks(n);
      for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{n + 1},
                                 std::int64_t{97}, std::int64_t{12345}}) {
        SCOPED_TRACE(shape.name + " N=" + std::to_string(n) + " count=" + std::to_string(count));
        std::vector<Schedule> all;
        for (int r = 0; r < n; ++r) {
          all.push_back(Hierarchical().Build(r, n, count, 0, shape.placement));
          ASSERT_TRUE(Validate(all.back()).ok()) << Validate(all.back());
          ASSERT_EQ(all.back().rounds.size(), all.front().rounds.size());
        }
        ASSERT_TRUE(ValidateMatching(all).ok()) << ValidateMatching(all);
        EXPECT_EQ(static_cast<int>(all.front().rounds.size()),
                  Hierarchical().formula_rounds(n, count, shape.placement));
        const TrafficSummary t = CountTraffic(Hierarchical(), n, count * 4, 4, 0, shape.placement);
        EXPECT_EQ(t.total_bytes, Hierarchical().formula_bytes(n, count * 4));
        EXPECT_EQ(t.cross_rack_bytes, 2 * std::int64_t{racks - 1} * count * 4);
      }
    }
  }
}

// 2(K-1) + w·2(R-1): racks of equal size need one wave; racks of 2 and 4
// need as many as the chunk boundaries make (8 elements: pieces held by
// (a0,b0) (a0,b1) (a1,b2) (a1,b3), 2 waves; 10 elements: boundaries 5 and
// 3, 6, 8 give (a0,b0) (a0,b1) (a1,b1) (a1,b2) (a1,b3), 3 waves).
TEST(Hierarchical, RoundsFollowTheRackShapes) {
  EXPECT_EQ(Hierarchical().formula_rounds(8, 1024, Placement::Packed({4, 4})), 2 * 3 + 2 * 1);
  EXPECT_EQ(Hierarchical().formula_rounds(12, 1024, Placement::Packed({4, 4, 4})), 2 * 3 + 2 * 2);
  EXPECT_EQ(Hierarchical().formula_rounds(6, 8, Placement::Packed({2, 4})), 2 * 3 + 2 * 2);
  EXPECT_EQ(Hierarchical().formula_rounds(6, 10, Placement::Packed({2, 4})), 2 * 3 + 3 * 2);
  EXPECT_EQ(Hierarchical().formula_rounds(8, 1024), 2 * 7);  // flat: the ring's
  EXPECT_EQ(Hierarchical().formula_rounds(1, 1024), 0);
}

// Where every rack holds all ranks, hierarchical is the ring.
TEST(Hierarchical, OnTheFlatSwitchItIsTheRing) {
  for (int n : {1, 2, 5, 8}) {
    for (int r = 0; r < n; ++r) {
      const Schedule h = Hierarchical().Build(r, n, 101);
      const Schedule ring = BuildAllReduceRing(r, n, 101);
      ASSERT_EQ(h.rounds.size(), ring.rounds.size());
      for (std::size_t k = 0; k < h.rounds.size(); ++k) {
        EXPECT_EQ(h.rounds[k].steps, ring.rounds[k].steps) << "N=" << n << " rank " << r;
      }
    }
  }
}

TEST(Hierarchical, EveryRackShapeGivesTheExactSumInEveryType) {
  for (int n = 1; n <= 16; ++n) {
    for (const Shape& shape : ShapesFor(n)) {
      for (DataType type : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32,
                            DataType::kFloat16}) {
        for (std::int64_t count : {std::int64_t{1}, std::int64_t{37}, std::int64_t{n + 1}}) {
          SCOPED_TRACE(shape.name + " N=" + std::to_string(n) + " " +
                       std::string(Name(type)) + " count=" + std::to_string(count));
          const InProcessRun run =
              RunInProcess(Hierarchical(), MakeInputs(Semantics::kAllReduce, n, count, type, 0),
                           {.type = type, .placement = shape.placement});
          for (int r = 0; r < n; ++r) ASSERT_TRUE(run.status[r].ok()) << run.status[r];
          const Mismatches wrong =
              CheckResults(Semantics::kAllReduce, run.buffers, count, type, ReduceOp::kSum, 0);
          EXPECT_EQ(wrong.count, 0) << "first: " << wrong.first;
        }
      }
    }
  }
}

// The fabric: 2 racks x 4 hosts, 4 MiB of float32.
TEST(RackTraffic, UplinkBytesOfTwoRacksOfFourEqualTheirClosedForms) {
  constexpr std::int64_t kBytes = 4 << 20;
  const Placement packed = Placement::Packed({4, 4});
  const Placement round_robin = Placement::RoundRobin({4, 4});
  const UplinkTraffic one_m{kBytes, kBytes};
  const UplinkTraffic ring_hop{2 * 7 * kBytes / 8, 2 * 7 * kBytes / 8};  // 2(N-1)/N M
  const UplinkTraffic every_hop{4 * ring_hop.bytes_up, 4 * ring_hop.bytes_down};
  EXPECT_EQ(CountTraffic(Hierarchical(), 8, kBytes, 4, 0, packed).per_rack,
            (std::vector<UplinkTraffic>{one_m, one_m}));
  EXPECT_EQ(CountTraffic(*FindCollective("ring"), 8, kBytes, 4, 0, packed).per_rack,
            (std::vector<UplinkTraffic>{ring_hop, ring_hop}));
  EXPECT_EQ(CountTraffic(*FindCollective("ring"), 8, kBytes, 4, 0, round_robin).per_rack,
            (std::vector<UplinkTraffic>{every_hop, every_hop}));
  EXPECT_EQ(CountTraffic(*FindCollective("ring"), 8, kBytes, 4).per_rack,
            (std::vector<UplinkTraffic>{UplinkTraffic{}}));
}

}  // namespace
}  // namespace testbed
