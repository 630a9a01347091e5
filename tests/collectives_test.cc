// Every collective x world size 1..17 x element count {0, 1, N-1, N+1,
// 1000003} x data type (float16 on eight of the world sizes), run over the
// in-process transport: every rank ends with the exact result, and the
// payload the transport counted equals the closed form of docs/design.md, as do
// the rounds.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <tuple>

#include "allreduce/collective.h"
#include "allreduce/inprocess_run.h"
#include "allreduce/traffic.h"
#include "allreduce/expected_values.h"

namespace testbed {
namespace {


enum class CountKind { kZero, kOne, kNMinus1, kNPlus1, kLarge };

std::int64_t CountFor(CountKind kind, int n) {
  switch (kind) {
    case CountKind::kZero: return 0;
    case CountKind::kOne: return 1;
    case CountKind::kNMinus1: return n - 1;
    case CountKind::kNPlus1: return n + 1;
    case CountKind::kLarge: return 1000003;  // prime: never divisible by N > 1
  }
  return 0;
}

std::string CountName(CountKind kind) {
  switch (kind) {
    case CountKind::kZero: return "count0";
    case CountKind::kOne: return "count1";
    case CountKind::kNMinus1: return "countNminus1";
    case CountKind::kNPlus1: return "countNplus1";
    case CountKind::kLarge: return "count1000003";
  }
  return "";
}

// Runs `collective` and checks values and measured traffic.
void RunAndCheck(const Collective& collective, int n, std::int64_t count, DataType type,
                 ReduceOp op, int root, MemoryType memory = MemoryType::kHost,
                 std::size_t segment_bytes = 0) {
  const std::vector<Bytes> inputs = MakeInputs(collective.semantics, n, count, type, root);
  const InProcessRun run = RunInProcess(collective, inputs,
                                        {.type = type,
                                         .op = op,
                                         .root = root,
                                         .memory = memory,
                                         .segment_bytes = segment_bytes});
  for (int r = 0; r < n; ++r) ASSERT_TRUE(run.status[r].ok()) << run.status[r];

  const Mismatches wrong =
      CheckResults(collective.semantics, run.buffers, count, type, op, root);
  EXPECT_EQ(wrong.count, 0) << "first: " << wrong.first;

  const std::int64_t bytes = count * static_cast<std::int64_t>(ElementSize(type));
  std::int64_t sent = 0, received = 0;
  for (const auto& per_peer : run.traffic) {
    for (const PeerTraffic& t : per_peer) {
      sent += t.bytes_sent;
      received += t.bytes_received;
    }
  }
  EXPECT_EQ(sent, collective.formula_bytes(n, bytes)) << collective.formula;
  EXPECT_EQ(received, sent);

  const TrafficSummary summary = CountTraffic(collective, n, bytes, ElementSize(type), root);
  EXPECT_EQ(summary.total_bytes, sent);
  EXPECT_EQ(summary.rounds, collective.formula_rounds(n));
}

using CrossParam = std::tuple<std::string, int, CountKind, DataType>;

class CollectiveCrossProduct : public ::testing::TestWithParam<CrossParam> {};

TEST_P(CollectiveCrossProduct, ExactResultAndTraffic) {
  const auto& [name, n, kind, type] = GetParam();
  const Collective* collective = FindCollective(name);
  ASSERT_NE(collective, nullptr);
  RunAndCheck(*collective, n, CountFor(kind, n), type, ReduceOp::kSum, /*root=*/0);
}

std::vector<std::string> CollectiveNamesForTests() {
  std::vector<std::string> names;
  for (const Collective* c : CollectivesOf(Kinds::kScheduled)) names.emplace_back(c->name);
  return names;
}

// Every collective on fake-device memory: inaccessible pages that only the
// memory's own operations open, so the executor or the transport touching a
// byte directly - as host code touching a GPU pointer would - crashes the test.
using DeviceParam = std::tuple<std::string, int>;
class CollectiveOnDeviceMemory : public ::testing::TestWithParam<DeviceParam> {};

TEST_P(CollectiveOnDeviceMemory, ExactResultAndTrafficWithoutHostAccess) {
  const auto& [name, n] = GetParam();
  const Collective* collective = FindCollective(name);
  ASSERT_NE(collective, nullptr);
  for (std::int64_t count : {std::int64_t{0}, std::int64_t{n + 1}, std::int64_t{3001}}) {
    SCOPED_TRACE(count);
    RunAndCheck(*collective, n, count, DataType::kFloat32, ReduceOp::kSum, n - 1,
                MemoryType::kFakeDevice);
  }
}

INSTANTIATE_TEST_SUITE_P(FakeDevice, CollectiveOnDeviceMemory,
                         ::testing::Combine(::testing::ValuesIn(CollectiveNamesForTests()),
                                            ::testing::Values(1, 2, 3, 5, 8)),
                         [](const auto& info) {
                           std::string id = std::get<0>(info.param) + "_N" +
                                            std::to_string(std::get<1>(info.param));
                           std::replace(id.begin(), id.end(), '-', '_');
                           return id;
                         });


std::string CrossName(const ::testing::TestParamInfo<CrossParam>& info) {
  const auto& [name, n, kind, type] = info.param;
  std::string id = name + "_N" + std::to_string(n) + "_" + CountName(kind) + "_" +
                   std::string(Name(type));
  std::replace(id.begin(), id.end(), '-', '_');
  return id;
}

INSTANTIATE_TEST_SUITE_P(
    AllCollectives, CollectiveCrossProduct,
    ::testing::Combine(::testing::ValuesIn(CollectiveNamesForTests()), ::testing::Range(1, 18),
                       ::testing::Values(CountKind::kZero, CountKind::kOne, CountKind::kNMinus1,
                                         CountKind::kNPlus1, CountKind::kLarge),
                       ::testing::Values(DataType::kFloat32, DataType::kFloat64,
                                         DataType::kInt32)),
    CrossName);

// float16 (inputs that sum exactly in half: expected_values.h), on fewer
// world sizes than the wider types - the schedules are the same, only the
// element size and the reduction's rounding differ.
INSTANTIATE_TEST_SUITE_P(
    AllCollectivesFloat16, CollectiveCrossProduct,
    ::testing::Combine(::testing::ValuesIn(CollectiveNamesForTests()),
                       ::testing::Values(1, 2, 3, 4, 5, 8, 13, 17),
                       ::testing::Values(CountKind::kZero, CountKind::kOne, CountKind::kNMinus1,
                                         CountKind::kNPlus1, CountKind::kLarge),
                       ::testing::Values(DataType::kFloat16)),
    CrossName);

// float16 where its inputs change shape (expected_values.h): from N = 20 the
// index period shrinks, from N = 63 the ranks repeat; still exact.
TEST(CollectiveFloat16, ExactAtWorldSizesWhereTheInputsShrink) {
  for (const Collective* collective : CollectivesOf(Kinds::kScheduledAllReduce)) {
    if (std::string_view(collective->name) == "naive") continue;  // N^2 copies at N = 64
    for (int n : {20, 40, 64}) {
      SCOPED_TRACE(std::string(collective->name) + " N=" + std::to_string(n));
      RunAndCheck(*collective, n, 1001, DataType::kFloat16, ReduceOp::kSum, 0);
    }
  }
}

// Min and max, for every collective that reduces (from the registry).
// Segmented (pipelined) runs of every collective: exact values and exact
// payload, as round by round, for counts that do not divide into segments,
// segments of one element and segments larger than the message. On inputs
// whose float sums depend on the order of reduction, the result has the same
// bits as the round-by-round run's.
using SegmentParam = std::tuple<std::string, int, std::int64_t, std::size_t>;
class SegmentedCollective : public ::testing::TestWithParam<SegmentParam> {};

// Floats with varied mantissas, different on every rank.
std::vector<Bytes> OrderSensitiveInputs(int n, std::int64_t count) {
  std::vector<Bytes> inputs(n, Bytes(count * sizeof(float)));
  std::uint32_t x = 12345;
  for (Bytes& input : inputs) {
    for (std::int64_t i = 0; i < count; ++i) {
      x = x * 1664525u + 1013904223u;
      const float value = static_cast<float>(x >> 8) * 1e-3f - 8000.0f;
      std::memcpy(input.data() + i * sizeof(float), &value, sizeof(float));
    }
  }
  return inputs;
}

TEST_P(SegmentedCollective, ExactAndBitIdenticalToRoundByRound) {
  const auto& [name, n, count, segment] = GetParam();
  const Collective* collective = FindCollective(name);
  ASSERT_NE(collective, nullptr);
  const int root = n - 1;
  RunAndCheck(*collective, n, count, DataType::kFloat32, ReduceOp::kSum, root, MemoryType::kHost,
              segment);
  RunAndCheck(*collective, n, count, DataType::kFloat64, ReduceOp::kSum, root, MemoryType::kHost,
              segment);
  RunAndCheck(*collective, n, count, DataType::kFloat16, ReduceOp::kSum, root, MemoryType::kHost,
              segment);

  const std::vector<Bytes> inputs = OrderSensitiveInputs(n, count);
  const InProcessRun rounds = RunInProcess(*collective, inputs, {.root = root});
  const InProcessRun segments =
      RunInProcess(*collective, inputs, {.root = root, .segment_bytes = segment});
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(rounds.status[r].ok()) << rounds.status[r];
    ASSERT_TRUE(segments.status[r].ok()) << segments.status[r];
    EXPECT_TRUE(segments.buffers[r] == rounds.buffers[r]) << "rank " << r;
    for (int peer = 0; peer < n; ++peer) {
      EXPECT_EQ(segments.traffic[r][peer].bytes_sent, rounds.traffic[r][peer].bytes_sent);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Segments, SegmentedCollective,
    ::testing::Combine(::testing::ValuesIn(CollectiveNamesForTests()),
                       ::testing::Values(1, 2, 3, 4, 5, 8, 13),
                       ::testing::Values(std::int64_t{0}, std::int64_t{1}, std::int64_t{37},
                                         std::int64_t{1001}),
                       // One float (less than a double: still one element), three
                       // floats, 1000 bytes, and more than any message here.
                       ::testing::Values(std::size_t{4}, std::size_t{12}, std::size_t{1000},
                                         std::size_t{1} << 30)),
    [](const ::testing::TestParamInfo<SegmentParam>& info) {
      std::string id = std::get<0>(info.param) + "_N" + std::to_string(std::get<1>(info.param)) +
                       "_count" + std::to_string(std::get<2>(info.param)) + "_segment" +
                       std::to_string(std::get<3>(info.param));
      std::replace(id.begin(), id.end(), '-', '_');
      return id;
    });

// A large odd count cut into many segments, on fake-device memory too.
TEST(SegmentedCollectiveLarge, RingAndNaiveOnHostAndDeviceMemory) {
  for (const char* name : {"ring", "naive", "halving-doubling"}) {
    const Collective* collective = FindCollective(name);
    ASSERT_NE(collective, nullptr);
    for (MemoryType memory : {MemoryType::kHost, MemoryType::kFakeDevice}) {
      SCOPED_TRACE(std::string(name) + " " + std::string(Name(memory)));
      RunAndCheck(*collective, 5, 100003, DataType::kFloat32, ReduceOp::kSum, 0, memory, 4096);
    }
  }
}

std::vector<std::string> ReducingCollectiveNames() {
  std::vector<std::string> names;
  for (const Collective* c : CollectivesOf(Kinds::kScheduled)) {
    if (c->semantics == Semantics::kAllReduce || c->semantics == Semantics::kReduceScatter ||
        c->semantics == Semantics::kReduce) {
      names.emplace_back(c->name);
    }
  }
  return names;
}

using OpParam = std::tuple<std::string, int, ReduceOp>;
class CollectiveReduceOps : public ::testing::TestWithParam<OpParam> {};

TEST_P(CollectiveReduceOps, ExactResult) {
  const auto& [name, n, op] = GetParam();
  const Collective* collective = FindCollective(name);
  ASSERT_NE(collective, nullptr);
  RunAndCheck(*collective, n, 1001, DataType::kFloat32, op, 0);
  RunAndCheck(*collective, n, 1001, DataType::kFloat16, op, 0);
}

INSTANTIATE_TEST_SUITE_P(
    MinMax, CollectiveReduceOps,
    ::testing::Combine(::testing::ValuesIn(ReducingCollectiveNames()),
                       ::testing::Values(2, 3, 6, 8, 11),
                       ::testing::Values(ReduceOp::kMin, ReduceOp::kMax)),
    [](const ::testing::TestParamInfo<OpParam>& info) {
      std::string id = std::get<0>(info.param) + "_N" + std::to_string(std::get<1>(info.param)) +
                       "_" + std::string(Name(std::get<2>(info.param)));
      std::replace(id.begin(), id.end(), '-', '_');
      return id;
    });

// Broadcast and reduce from every root.
using RootParam = std::tuple<std::string, int>;
class RootedCollective : public ::testing::TestWithParam<RootParam> {};

TEST_P(RootedCollective, EveryRoot) {
  const auto& [name, n] = GetParam();
  const Collective* collective = FindCollective(name);
  ASSERT_NE(collective, nullptr);
  for (int root = 0; root < n; ++root) {
    SCOPED_TRACE("root " + std::to_string(root));
    RunAndCheck(*collective, n, 2 * n + 1, DataType::kInt32, ReduceOp::kSum, root);
  }
}

INSTANTIATE_TEST_SUITE_P(Roots, RootedCollective,
                         ::testing::Combine(::testing::Values("broadcast", "reduce"),
                                            ::testing::Values(2, 3, 5, 7, 8, 12)),
                         [](const ::testing::TestParamInfo<RootParam>& info) {
                           return std::get<0>(info.param) + "_N" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace testbed
