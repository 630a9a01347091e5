// The oracle itself: CheckRank / CheckResults (allreduce/expected_values.h)
// decide every unit test's verdict and the `wrong` column of every measured
// run, so they are handed known-wrong buffers here and must count exactly
// what is wrong - and nothing that the collective leaves undefined.
//
// The correct buffers are real outputs (RunInProcess of a collective of each
// semantics), first held against an oracle written out here independently of
// expected_values.h; then one thing is broken at a time: one element off by
// one (first, middle, last checked element), one rank entirely wrong, a chunk
// landing one slot off, a NaN.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "allreduce/chunking.h"
#include "allreduce/collective.h"
#include "allreduce/data_type.h"
#include "allreduce/expected_values.h"
#include "allreduce/inprocess_run.h"

namespace testbed {
namespace {

using ::testing::StartsWith;

constexpr int kWorld = 4;
constexpr std::int64_t kCount = 13;  // chunks of 4, 3, 3, 3: uneven on purpose
constexpr int kRoot = 2;             // not 0, so that "the root" cannot be confused with rank 0

// Written out independently of expected_values.h: rank r contributes
// r + 1 + 16 (i mod 97) at element i; in float16, whose sums must stay
// integers up to 2048, r + 1 + (i mod 97) (at N = 4 the sums reach 394).
double Input(DataType type, int rank, std::int64_t i) {
  const double step = type == DataType::kFloat16 ? 1 : 16;
  return rank + 1 + step * static_cast<double>(i % 97);
}

double Reduction(DataType type, ReduceOp op, std::int64_t i) {
  double sum = 0, lo = Input(type, 0, i), hi = Input(type, 0, i);
  for (int r = 0; r < kWorld; ++r) {
    sum += Input(type, r, i);
    lo = std::min(lo, Input(type, r, i));
    hi = std::max(hi, Input(type, r, i));
  }
  switch (op) {
    case ReduceOp::kSum: return sum;
    case ReduceOp::kMin: return lo;
    case ReduceOp::kMax: return hi;
  }
  return 0;
}

// [begin, end) of rank r's chunk of kCount over kWorld, written out: the
// first kCount % kWorld chunks get one element more.
std::pair<std::int64_t, std::int64_t> ChunkRange(int r) {
  const std::int64_t base = kCount / kWorld, extra = kCount % kWorld;
  const std::int64_t begin = r * base + std::min<std::int64_t>(r, extra);
  return {begin, begin + base + (r < extra ? 1 : 0)};
}

int Owner(std::int64_t i) {
  for (int r = 0; r < kWorld; ++r) {
    if (i >= ChunkRange(r).first && i < ChunkRange(r).second) return r;
  }
  return -1;
}

// Whether the semantics promise anything at element i of rank r.
bool Checked(Semantics s, int r, std::int64_t i) {
  switch (s) {
    case Semantics::kReduce: return r == kRoot;
    case Semantics::kReduceScatter: return i >= ChunkRange(r).first && i < ChunkRange(r).second;
    default: return true;
  }
}

double Expected(DataType type, Semantics s, ReduceOp op, std::int64_t i) {
  switch (s) {
    case Semantics::kAllReduce:
    case Semantics::kReduceScatter:
    case Semantics::kReduce: return Reduction(type, op, i);
    case Semantics::kBroadcast: return Input(type, kRoot, i);
    case Semantics::kAllGather: return Input(type, Owner(i), i);
  }
  return 0;
}

std::int64_t CheckedCount(Semantics s, int r) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < kCount; ++i) n += Checked(s, r, i);
  return n;
}

std::string SemanticsName(Semantics s) {
  switch (s) {
    case Semantics::kAllReduce: return "AllReduce";
    case Semantics::kReduceScatter: return "ReduceScatter";
    case Semantics::kAllGather: return "AllGather";
    case Semantics::kBroadcast: return "Broadcast";
    case Semantics::kReduce: return "Reduce";
  }
  return "";
}

using Param = std::tuple<Semantics, DataType, ReduceOp>;

class CheckResultsOracle : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const Collective* collective = nullptr;
    for (const Collective& c : AllCollectives()) {
      if (c.semantics == semantics() && c.has_schedule()) {
        collective = &c;
        break;
      }
    }
    ASSERT_NE(collective, nullptr) << SemanticsName(semantics());
    InProcessRun run = RunInProcess(*collective, MakeInputs(semantics(), kWorld, kCount, type(), kRoot),
                                    {.type = type(), .op = op(), .root = kRoot});
    for (int r = 0; r < kWorld; ++r) ASSERT_TRUE(run.status[r].ok()) << run.status[r];
    buffers_ = std::move(run.buffers);
    ASSERT_EQ(buffers_.size(), static_cast<std::size_t>(kWorld));
    // The real output agrees with the oracle written out above.
    for (int r = 0; r < kWorld; ++r) {
      for (std::int64_t i = 0; i < kCount; ++i) {
        if (Checked(semantics(), r, i)) {
          ASSERT_EQ(Get(r, i), Expected(type(), semantics(), op(), i)) << "rank " << r << " element " << i;
        }
      }
    }
  }

  Semantics semantics() const { return std::get<0>(GetParam()); }
  DataType type() const { return std::get<1>(GetParam()); }
  ReduceOp op() const { return std::get<2>(GetParam()); }

  double Get(int r, std::int64_t i) const { return LoadElement(type(), buffers_[r].data(), i); }
  void Set(int r, std::int64_t i, double v) { StoreElement(type(), buffers_[r].data(), i, v); }

  Mismatches Rank(int r) const {
    return CheckRank(semantics(), kWorld, r, buffers_[r].data(), kCount, type(), op(), kRoot);
  }
  Mismatches All() const { return CheckResults(semantics(), buffers_, kCount, type(), op(), kRoot); }

  // A rank whose result is checked: the root for reduce, rank 1 otherwise.
  int Victim() const { return semantics() == Semantics::kReduce ? kRoot : 1; }

  std::vector<Bytes> buffers_;
};

std::string Prefix(int r, std::int64_t i) {
  return "rank " + std::to_string(r) + " element " + std::to_string(i) + ":";
}

TEST_P(CheckResultsOracle, CorrectBuffersHaveNoMismatch) {
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(Rank(r).count, 0) << Rank(r).first;
  EXPECT_EQ(All().count, 0) << All().first;
  EXPECT_EQ(All().first, "");
}

// One element off by one, at the first, a middle and the last element the
// victim's result promises: exactly one mismatch, named.
TEST_P(CheckResultsOracle, OneElementOffByOneIsOneMismatch) {
  std::vector<std::int64_t> checked;
  for (std::int64_t i = 0; i < kCount; ++i) {
    if (Checked(semantics(), Victim(), i)) checked.push_back(i);
  }
  ASSERT_GE(checked.size(), 3u);
  const std::vector<Bytes> correct = buffers_;
  for (std::int64_t i : {checked.front(), checked[checked.size() / 2], checked.back()}) {
    SCOPED_TRACE("element " + std::to_string(i));
    for (double delta : {+1.0, -1.0}) {
      buffers_ = correct;
      Set(Victim(), i, Get(Victim(), i) + delta);
      EXPECT_EQ(Rank(Victim()).count, 1);
      EXPECT_THAT(Rank(Victim()).first, StartsWith(Prefix(Victim(), i)));
      EXPECT_EQ(All().count, 1);
      EXPECT_THAT(All().first, StartsWith(Prefix(Victim(), i)));
    }
  }
}

// The very last element of the buffer, on a rank that must hold it.
TEST_P(CheckResultsOracle, LastElementOfTheBufferIsChecked) {
  const int r = semantics() == Semantics::kReduce ? kRoot : kWorld - 1;
  ASSERT_TRUE(Checked(semantics(), r, kCount - 1));
  Set(r, kCount - 1, Get(r, kCount - 1) + 1);
  EXPECT_EQ(All().count, 1);
  EXPECT_THAT(All().first, StartsWith(Prefix(r, kCount - 1)));
}

// A whole rank wrong: every element it promises counts, and CheckResults
// adds them up over ranks and names the lowest rank's first.
TEST_P(CheckResultsOracle, OneRankEntirelyWrongCountsEveryPromisedElement) {
  const std::vector<Bytes> correct = buffers_;
  for (int victim = 0; victim < kWorld; ++victim) {
    SCOPED_TRACE("rank " + std::to_string(victim));
    buffers_ = correct;
    for (std::int64_t i = 0; i < kCount; ++i) Set(victim, i, Get(victim, i) + 3);
    const std::int64_t promised = CheckedCount(semantics(), victim);
    EXPECT_EQ(Rank(victim).count, promised);
    EXPECT_EQ(All().count, promised);
    if (promised > 0) {
      std::int64_t first = 0;
      while (!Checked(semantics(), victim, first)) ++first;
      EXPECT_THAT(All().first, StartsWith(Prefix(victim, first)));
    } else {
      EXPECT_EQ(All().first, "");
    }
  }
  // Two ranks wrong: counts add, the lower rank is named.
  buffers_ = correct;
  for (int victim : {3, kRoot}) {
    for (std::int64_t i = 0; i < kCount; ++i) Set(victim, i, -1000);
  }
  const std::int64_t both = CheckedCount(semantics(), 3) + CheckedCount(semantics(), kRoot);
  EXPECT_EQ(All().count, both);
  std::int64_t first = 0;
  while (!Checked(semantics(), kRoot, first)) ++first;
  EXPECT_THAT(All().first, StartsWith(Prefix(kRoot, first)));
}

// What the semantics leave undefined is never counted.
TEST_P(CheckResultsOracle, GarbageWhereNothingIsPromisedIsNotCounted) {
  std::int64_t planted = 0;
  for (int r = 0; r < kWorld; ++r) {
    for (std::int64_t i = 0; i < kCount; ++i) {
      if (!Checked(semantics(), r, i)) {
        Set(r, i, -12345);
        ++planted;
      }
    }
  }
  if (semantics() == Semantics::kReduce || semantics() == Semantics::kReduceScatter) {
    EXPECT_GT(planted, 0);
  }
  EXPECT_EQ(All().count, 0) << All().first;
}

// The victim's chunk lands one slot to the right: every element it now
// covers but the chunk's own first (left as it was) is wrong, as long as the
// victim's result promises it.
TEST_P(CheckResultsOracle, ChunkShiftedByOneElement) {
  const int r = Victim();
  // Copies, not a structured binding: clang 14 (the sanitized build's) cannot
  // capture a binding in a lambda.
  const auto range = ChunkRange(1);
  const std::int64_t begin = range.first, end = range.second;
  const std::vector<double> chunk = [&] {
    std::vector<double> v;
    for (std::int64_t i = begin; i < end; ++i) v.push_back(Get(r, i));
    return v;
  }();
  std::int64_t wrong = 0;
  for (std::int64_t i = begin + 1; i <= end && i < kCount; ++i) {
    Set(r, i, chunk[i - 1 - begin]);
    wrong += Checked(semantics(), r, i);
  }
  if (semantics() == Semantics::kReduceScatter) {
    EXPECT_EQ(wrong, end - begin - 1);  // the element after the chunk is not rank 1's
  } else {
    EXPECT_EQ(wrong, end - begin);
  }
  EXPECT_EQ(Rank(r).count, wrong);
  EXPECT_EQ(All().count, wrong);
  EXPECT_THAT(All().first, StartsWith(Prefix(r, begin + 1)));
}

// A NaN is wrong (NaN != anything, and no tolerance may swallow it); so is
// an infinity, and for int32 the extremes.
TEST_P(CheckResultsOracle, NaNOrExtremeValueIsAMismatch) {
  const int r = Victim();
  std::int64_t i = 0;
  while (!Checked(semantics(), r, i)) ++i;
  i += 1;  // not the first element either
  ASSERT_TRUE(Checked(semantics(), r, i));
  const bool is_int = type() == DataType::kInt32;
  const double bad = is_int ? std::numeric_limits<std::int32_t>::min()
                            : std::numeric_limits<double>::quiet_NaN();
  Set(r, i, bad);
  if (!is_int) {
    ASSERT_TRUE(std::isnan(Get(r, i)));
  }
  EXPECT_EQ(All().count, 1);
  EXPECT_THAT(All().first, StartsWith(Prefix(r, i)));
  Set(r, kCount - 1,
      is_int ? std::numeric_limits<std::int32_t>::max() : std::numeric_limits<double>::infinity());
  EXPECT_EQ(All().count, 1 + Checked(semantics(), r, kCount - 1));
}

INSTANTIATE_TEST_SUITE_P(
    EverySemanticsTypeAndOp, CheckResultsOracle,
    ::testing::Combine(::testing::Values(Semantics::kAllReduce, Semantics::kReduceScatter,
                                         Semantics::kAllGather, Semantics::kBroadcast,
                                         Semantics::kReduce),
                       ::testing::Values(DataType::kFloat32, DataType::kFloat64, DataType::kInt32,
                                         DataType::kFloat16),
                       ::testing::Values(ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax)),
    [](const auto& info) {
      return SemanticsName(std::get<0>(info.param)) + "_" +
             std::string(Name(std::get<1>(info.param))) + "_" +
             std::string(Name(std::get<2>(info.param)));
    });

// Large values: an off-by-one is still one mismatch where float32 can hold it
// exactly, i.e. no relative tolerance hides it at the magnitude of real sums.
TEST(CheckResultsLarge, OffByOneAtTheEndOfALongBufferIsFound) {
  const std::int64_t count = 1000003;
  const int world = 5;
  const InputPattern pattern = InputPatternFor(DataType::kFloat64, world);
  std::vector<Bytes> buffers(world, Bytes(count * ElementSize(DataType::kFloat64)));
  for (int r = 0; r < world; ++r) {
    for (std::int64_t i = 0; i < count; ++i) {
      StoreElement(DataType::kFloat64, buffers[r].data(), i,
                   Reduced(pattern, ReduceOp::kSum, world, i));
    }
  }
  EXPECT_EQ(CheckResults(Semantics::kAllReduce, buffers, count, DataType::kFloat64,
                         ReduceOp::kSum, 0).count,
            0);
  StoreElement(DataType::kFloat64, buffers[4].data(), count - 1,
               Reduced(pattern, ReduceOp::kSum, world, count - 1) + 1);
  const Mismatches m =
      CheckResults(Semantics::kAllReduce, buffers, count, DataType::kFloat64, ReduceOp::kSum, 0);
  EXPECT_EQ(m.count, 1);
  EXPECT_THAT(m.first, StartsWith("rank 4 element 1000002:"));
}

// float16's inputs, for every world size the harness takes (1..1024): sum,
// min and max as the closed forms say (worked out here by brute force), the
// sum - and so every partial sum, all inputs being positive - at most 2048,
// where every integer is a half; and the element index still shows up to
// N = 819, the rank up to 1024.
TEST(ExpectedValuesFloat16, EveryWorldSizeSumsExactlyInHalf) {
  std::vector<int> worlds;
  for (int world = 1; world <= 70; ++world) worlds.push_back(world);
  for (int world : {100, 200, 500, 819, 820, 1000, 1024}) worlds.push_back(world);
  for (int world : worlds) {
    SCOPED_TRACE("N = " + std::to_string(world));
    const InputPattern pattern = InputPatternFor(DataType::kFloat16, world);
    EXPECT_EQ(pattern.step, 1);
    if (world <= 19) {
      EXPECT_EQ(pattern.period, 97);
      EXPECT_EQ(pattern.rank_cycle, world);
    }
    if (world <= 819) {
      EXPECT_GE(pattern.period, 2);
    }
    if (world > 1) {
      EXPECT_GE(pattern.rank_cycle, 2);
    }
    for (std::int64_t i = 0; i < 97; ++i) {
      double sum = 0, lo = 1e9, hi = -1e9;
      for (int r = 0; r < world; ++r) {
        const double v = InputValue(pattern, r, i);
        ASSERT_EQ(v, std::floor(v));
        ASSERT_GE(v, 1);
        sum += v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      ASSERT_LE(sum, 2048) << "element " << i;
      ASSERT_EQ(Reduced(pattern, ReduceOp::kSum, world, i), sum) << "element " << i;
      ASSERT_EQ(Reduced(pattern, ReduceOp::kMin, world, i), lo) << "element " << i;
      ASSERT_EQ(Reduced(pattern, ReduceOp::kMax, world, i), hi) << "element " << i;
    }
  }
  // The other types keep r + 1 + 16 (i mod 97) at every N.
  for (DataType type : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32}) {
    const InputPattern pattern = InputPatternFor(type, 1024);
    EXPECT_EQ(InputValue(pattern, 1023, 98), 1024 + 16);
  }
}

}  // namespace
}  // namespace testbed
