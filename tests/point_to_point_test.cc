// Point-to-point schedules (allreduce/point_to_point.h) on the executor over
// the in-process transport: a pipeline's forward hand-off gives each stage
// the previous stage's buffer and leaves the first stage's alone; a ring
// shift (nccl-tests' sendrecv) gives every rank its predecessor's; both
// schedules fit together and move M per sending rank.
#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "allreduce/executor.h"
#include "allreduce/point_to_point.h"
#include "allreduce/transport/inprocess_transport.h"

namespace testbed {
namespace {

using BuildFn = std::function<Schedule(int rank)>;

// Runs each rank's schedule on its own thread; rank r's buffer starts as
// `count` floats of value r + 1. Returns each rank's buffer after, as values.
std::vector<std::vector<float>> RunOnThreads(int n, std::int64_t count, const BuildFn& build,
                                    std::vector<std::uint64_t>* sent = nullptr) {
  InProcessFabric fabric(n);
  std::vector<std::vector<float>> buffers(static_cast<std::size_t>(n));
  std::vector<absl::Status> status(static_cast<std::size_t>(n));
  if (sent != nullptr) sent->assign(static_cast<std::size_t>(n), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    buffers[r].assign(static_cast<std::size_t>(count), static_cast<float>(r + 1));
    threads.emplace_back([&, r] {
      const Schedule schedule = build(r);
      auto transport = fabric.Connect(r);
      Executor executor(*transport);
      executor.Prepare(schedule, DataType::kFloat32);
      status[r] = executor.Run(schedule, std::as_writable_bytes(std::span(buffers[r])),
                               DataType::kFloat32, ReduceOp::kSum);
      if (sent != nullptr) {
        for (const PeerTraffic& t : transport->Traffic()) (*sent)[r] += t.bytes_sent;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
  return buffers;
}

TEST(PointToPointTest, APipelineHandsEachStageThePreviousStagesBuffer) {
  const int n = 6;
  const std::vector<int> stages = {4, 1, 3, 0};  // ranks 2 and 5 sit out
  std::vector<std::uint64_t> sent;
  const auto buffers =
      RunOnThreads(n, 100, [&](int r) { return BuildPipelineShift(r, n, 100, stages); }, &sent);
  EXPECT_EQ(buffers[4][0], 5);  // the first stage keeps its own
  EXPECT_EQ(buffers[1][0], 5);
  EXPECT_EQ(buffers[3][99], 2);
  EXPECT_EQ(buffers[0][50], 4);
  EXPECT_EQ(buffers[2][0], 3);  // not a stage: untouched
  EXPECT_EQ(buffers[5][0], 6);
  for (int r : {4, 1, 3}) EXPECT_EQ(sent[r], 400u) << "rank " << r;
  for (int r : {0, 2, 5}) EXPECT_EQ(sent[r], 0u) << "rank " << r;
  std::vector<Schedule> all;
  for (int r = 0; r < n; ++r) all.push_back(BuildPipelineShift(r, n, 100, stages));
  EXPECT_TRUE(ValidateMatching(all).ok());
}

TEST(PointToPointTest, ARingShiftGivesEveryRankItsPredecessorsBuffer) {
  for (int n : {2, 3, 5}) {
    const auto buffers = RunOnThreads(n, 33, [&](int r) {
      return BuildSendRecv(r, n, 33, (r + 1) % n, (r + n - 1) % n);
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(buffers[r][0], static_cast<float>((r + n - 1) % n + 1)) << "N " << n << " rank " << r;
      EXPECT_EQ(buffers[r][32], buffers[r][0]);
    }
  }
}

}  // namespace
}  // namespace testbed
