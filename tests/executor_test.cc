// The executor's own rules, on hand-written schedules over the in-process
// transport: sends see the buffer as the round began, failures name the peer.
#include <gtest/gtest.h>

#include <thread>

#include "allreduce/executor.h"
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
  for (DataType type : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32}) {
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
  EXPECT_FALSE(ParseDataType("float16").has_value());
  EXPECT_EQ(ParseReduceOp("max"), ReduceOp::kMax);
}

}  // namespace
}  // namespace testbed
