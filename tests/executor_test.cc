// The executor's own rules, on hand-written schedules over the in-process
// transport: sends see the buffer as the round began, failures name the peer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "allreduce/collective.h"
#include "allreduce/executor.h"
#include "allreduce/inprocess_run.h"
#include "allreduce/transport/inprocess_transport.h"

namespace testbed {
namespace {

std::vector<std::byte> Floats(std::initializer_list<float> values) {
  std::vector<std::byte> out(values.size() * sizeof(float));
  std::int64_t i = 0;
  for (float v : values) StoreElement(DataType::kFloat32, out.data(), i++, v);
  return out;
}

TEST(ExecutorTest, SwapOfTheSameRangeSeesTheBufferAsTheRoundBegan) {
  // Both ranks send [0, 2) and copy the peer's [0, 2) over it in the same round:
  // a copy landing in place would race with its own send.
  InProcessFabric fabric(2);
  std::vector<std::vector<std::byte>> buffers = {Floats({1, 2, 3}), Floats({4, 5, 6})};
  std::vector<std::thread> threads;
  std::vector<absl::Status> status(2);
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      Schedule s{rank, 2, 3, {}};
      Round& round = s.AddRound("swap");
      s.Send(round, 1 - rank, 0, 2);
      s.RecvCopy(round, 1 - rank, 0, 2);
      auto transport = fabric.Connect(rank);
      Executor executor(*transport);
      EXPECT_GT(ScratchBytes(s, DataType::kFloat32), 0u);
      status[rank] = executor.Run(s, buffers[rank], DataType::kFloat32, ReduceOp::kSum);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(status[0].ok()) << status[0];
  ASSERT_TRUE(status[1].ok()) << status[1];
  EXPECT_EQ(buffers[0], Floats({4, 5, 3}));
  EXPECT_EQ(buffers[1], Floats({1, 2, 6}));
}

TEST(ExecutorTest, CopyIntoARangeNoSendReadsNeedsNoScratch) {
  Schedule s{0, 2, 4, {}};
  Round& round = s.AddRound("all-gather");
  s.Send(round, 1, 0, 2);
  s.RecvCopy(round, 1, 2, 2);
  EXPECT_EQ(ScratchBytes(s, DataType::kFloat64), 0u);
  s.RecvReduce(s.AddRound("reduce"), 1, 0, 3);
  EXPECT_EQ(ScratchBytes(s, DataType::kFloat64), 24u);
}

TEST(ExecutorTest, LostPeerFailsWithItsRankInsteadOfHanging) {
  InProcessFabric fabric(2);
  auto transport = fabric.Connect(0);
  Executor executor(*transport);
  Schedule s{0, 2, 1, {}};
  s.RecvReduce(s.AddRound("reduce"), 1, 0, 1);
  std::vector<std::byte> buffer = Floats({1});
  std::thread killer([&] { fabric.MarkLost(1); });
  const absl::Status st = executor.Run(s, buffer, DataType::kFloat32, ReduceOp::kSum);
  killer.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("rank 1"), std::string_view::npos) << st;
}

TEST(ExecutorTest, SilentPeerTimesOut) {
  InProcessFabric fabric(2, std::chrono::milliseconds(50));
  auto transport = fabric.Connect(0);
  Executor executor(*transport);
  Schedule s{0, 2, 1, {}};
  s.RecvCopy(s.AddRound("broadcast"), 1, 0, 1);
  std::vector<std::byte> buffer = Floats({1});
  const absl::Status st = executor.Run(s, buffer, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
}

TEST(ExecutorTest, RejectsMismatchedBufferAndInvalidSchedule) {
  InProcessFabric fabric(2);
  auto transport = fabric.Connect(0);
  Executor executor(*transport);
  Schedule s{0, 2, 4, {}};
  std::vector<std::byte> small = Floats({1, 2});
  EXPECT_EQ(executor.Run(s, small, DataType::kFloat32, ReduceOp::kSum).code(),
            absl::StatusCode::kInvalidArgument);
  s.Send(s.AddRound("bad"), 1, 3, 5);  // past the end
  std::vector<std::byte> buffer = Floats({1, 2, 3, 4});
  EXPECT_EQ(executor.Run(s, buffer, DataType::kFloat32, ReduceOp::kSum).code(),
            absl::StatusCode::kInvalidArgument);
  Schedule other_rank{1, 2, 4, {}};
  EXPECT_EQ(executor.Run(other_rank, buffer, DataType::kFloat32, ReduceOp::kSum).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DataTypeTest, ReduceIntoEveryTypeAndOp) {
  for (DataType type :
       {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kFloat16}) {
    std::vector<std::byte> a(3 * ElementSize(type)), b(3 * ElementSize(type));
    const double av[] = {1, -5, 7}, bv[] = {2, 3, 7};
    for (int i = 0; i < 3; ++i) {
      StoreElement(type, a.data(), i, av[i]);
      StoreElement(type, b.data(), i, bv[i]);
    }
    auto sum = a, mn = a, mx = a;
    ReduceInto(type, ReduceOp::kSum, sum.data(), b.data(), 3);
    ReduceInto(type, ReduceOp::kMin, mn.data(), b.data(), 3);
    ReduceInto(type, ReduceOp::kMax, mx.data(), b.data(), 3);
    EXPECT_EQ(LoadElement(type, sum.data(), 1), -2);
    EXPECT_EQ(LoadElement(type, mn.data(), 0), 1);
    EXPECT_EQ(LoadElement(type, mn.data(), 1), -5);
    EXPECT_EQ(LoadElement(type, mx.data(), 1), 3);
    EXPECT_EQ(LoadElement(type, mx.data(), 2), 7);
  }
  EXPECT_EQ(ParseDataType("float64"), DataType::kFloat64);
  EXPECT_EQ(ParseDataType("float16"), DataType::kFloat16);
  EXPECT_FALSE(ParseDataType("half").has_value());
  EXPECT_EQ(Name(DataType::kFloat16), "float16");
  EXPECT_EQ(ElementSize(DataType::kFloat16), 2u);
  EXPECT_EQ(DataTypeNames(), "float32, float64, int32, float16");
  EXPECT_EQ(ParseReduceOp("max"), ReduceOp::kMax);
}

// float16 by its bits, IEEE 754 binary16: sign, 5 exponent bits (bias 15),
// 10 fraction bits. Every expected value below is worked out from that
// layout, not from a conversion library: 1 = 0x3c00, 2^-11 = 0x1000 (biased
// exponent 4), 3*2^-11 = 1.5*2^-10 = 0x1600, 2048 = 2^11 = 0x6800 (a half's
// step there is 2), 65504 = 0x7bff (the largest half; its step is 32, so
// 65520 is the tie between it and 2^16, which does not fit: infinity,
// 0x7c00), 2^-24 = 0x0001 (the smallest subnormal), 0x03ff the largest
// subnormal, 0x0400 = 2^-14 the smallest normal.
std::vector<std::byte> Halves(std::initializer_list<std::uint16_t> bits) {
  std::vector<std::byte> out(bits.size() * 2);
  std::memcpy(out.data(), std::data(bits), out.size());
  return out;
}

std::vector<std::uint16_t> BitsOf(const std::vector<std::byte>& halves) {
  std::vector<std::uint16_t> bits(halves.size() / 2);
  std::memcpy(bits.data(), halves.data(), halves.size());
  return bits;
}

TEST(DataTypeTest, Float16SumRoundsToNearestEvenOnce) {
  struct Case {
    std::uint16_t a, b, sum;
    const char* what;
  };
  const Case cases[] = {
      {0x3c00, 0x1000, 0x3c00, "1 + 2^-11: the tie between 1 and 1 + 2^-10, to even (1)"},
      {0x3c00, 0x1600, 0x3c02, "1 + 3*2^-11: the tie between 1 + 2^-10 and 1 + 2^-9, to even"},
      {0x3c01, 0x1000, 0x3c02, "(1 + 2^-10) + 2^-11: a tie, to even (up)"},
      {0x6800, 0x3c00, 0x6800, "2048 + 1: the tie between 2048 and 2050, to even (2048)"},
      {0x6800, 0x4200, 0x6802, "2048 + 3: the tie between 2050 and 2052, to even (2052)"},
      {0x6800, 0x3c00 | 0x8000, 0x67ff, "2048 - 1 = 2047: exact below 2048"},
      {0x7bff, 0x4800, 0x7bff, "65504 + 8: below the tie, stays 65504"},
      {0x7bff, 0x4c00, 0x7c00, "65504 + 16 = 65520: the tie, to even, overflows to infinity"},
      {0x7bff, 0x7bff, 0x7c00, "65504 + 65504: infinity"},
      {0xfbff, 0xcc00, 0xfc00, "-65504 - 16: minus infinity"},
      {0x0001, 0x0001, 0x0002, "2^-24 + 2^-24 = 2^-23: subnormal, exact"},
      {0x03ff, 0x0001, 0x0400, "the largest subnormal + 2^-24 = 2^-14, the smallest normal"},
      {0x0400, 0x8001, 0x03ff, "2^-14 - 2^-24: back to the largest subnormal"},
      {0x8000, 0x8000, 0x8000, "-0 + -0 = -0"},
      {0x7c00, 0xfc00, 0x7fff, "inf - inf: NaN, as CUDA writes it (0x7fff)"},
  };
  for (const Case& c : cases) {
    std::vector<std::byte> dst = Halves({c.a}), src = Halves({c.b});
    ReduceInto(DataType::kFloat16, ReduceOp::kSum, dst.data(), src.data(), 1);
    EXPECT_EQ(BitsOf(dst)[0], c.sum) << c.what;
  }
}

TEST(DataTypeTest, Float16MinMaxPickAnOperandAndNaNIsCanonical) {
  // min(1, -2), max(1, -2), min(1, NaN) keeps 1, min(NaN, 1) is NaN as 0x7fff.
  std::vector<std::byte> mn = Halves({0x3c00, 0x3c00, 0x7e00, 0x0001});
  std::vector<std::byte> mx = mn;
  const std::vector<std::byte> other = Halves({0xc000, 0x7e00, 0x3c00, 0x8001});
  ReduceInto(DataType::kFloat16, ReduceOp::kMin, mn.data(), other.data(), 4);
  ReduceInto(DataType::kFloat16, ReduceOp::kMax, mx.data(), other.data(), 4);
  EXPECT_EQ(BitsOf(mn), (std::vector<std::uint16_t>{0xc000, 0x3c00, 0x7fff, 0x8001}));
  EXPECT_EQ(BitsOf(mx), (std::vector<std::uint16_t>{0x3c00, 0x3c00, 0x7fff, 0x0001}));
}

// Load and store: every half is a double exactly; a store rounds to nearest
// even (1/3 = 0x3555, 0.333251953125 = 1365/4096), clamps nothing (70000 is
// infinity) and keeps subnormals.
TEST(DataTypeTest, Float16LoadsExactlyAndStoresRoundedToNearestEven) {
  std::vector<std::byte> h = Halves({0x3555, 0x0001, 0x7bff, 0xc000, 0x7c00});
  EXPECT_EQ(LoadElement(DataType::kFloat16, h.data(), 0), 0.333251953125);
  EXPECT_EQ(LoadElement(DataType::kFloat16, h.data(), 1), std::ldexp(1.0, -24));
  EXPECT_EQ(LoadElement(DataType::kFloat16, h.data(), 2), 65504);
  EXPECT_EQ(LoadElement(DataType::kFloat16, h.data(), 3), -2);
  EXPECT_TRUE(std::isinf(LoadElement(DataType::kFloat16, h.data(), 4)));
  const double stored[] = {1.0 / 3, std::ldexp(1.0, -24), 2049, 70000, std::ldexp(1.0, -26)};
  const std::uint16_t bits[] = {0x3555, 0x0001, 0x6800, 0x7c00, 0x0000};
  for (int i = 0; i < 5; ++i) {
    std::vector<std::byte> one(2);
    StoreElement(DataType::kFloat16, one.data(), 0, stored[i]);
    EXPECT_EQ(BitsOf(one)[0], bits[i]) << stored[i];
  }
}

// A ring of halves over the in-process transport: small integers sum exactly
// (a half holds every integer up to 2048), on every rank.
TEST(DataTypeTest, Float16RingOfSmallIntegersIsExact) {
  constexpr int kWorld = 5;
  constexpr std::int64_t kCount = 1003;
  const Collective& ring = *FindCollective("ring");
  std::vector<Bytes> inputs(kWorld, Bytes(kCount * 2));
  for (int r = 0; r < kWorld; ++r) {
    for (std::int64_t i = 0; i < kCount; ++i) {
      StoreElement(DataType::kFloat16, inputs[r].data(), i, (r + 1) * (i % 101));
    }
  }
  const InProcessRun run = RunInProcess(ring, inputs, {.type = DataType::kFloat16});
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(run.status[r].ok()) << run.status[r];
    for (std::int64_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(LoadElement(DataType::kFloat16, run.buffers[r].data(), i),
                static_cast<double>(15 * (i % 101)))
          << "rank " << r << " element " << i;
    }
  }
  std::int64_t sent = 0;
  for (const auto& per_peer : run.traffic) {
    for (const PeerTraffic& t : per_peer) sent += t.bytes_sent;
  }
  EXPECT_EQ(sent, ring.formula_bytes(kWorld, kCount * 2)) << "2 bytes an element on the wire";
}

}  // namespace
}  // namespace testbed
