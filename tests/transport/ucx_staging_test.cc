// UcxTransport's staged path on fake-device memory (pages no host code may
// touch outside the memory's own operations, as a GPU's): bounce buffers
// come from the transport's pool and are reused, so over many iterations of
// a collective the pool holds at most what one iteration has in flight at
// once - never a buffer per operation; every payload byte is copied through
// host memory exactly once each way; results stay exact, segmented (the
// staged default) or in whole steps.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "allreduce/collective.h"
#include "allreduce/executor.h"
#include "allreduce/expected_values.h"
#include "allreduce/segment_plan.h"
#include "allreduce/transport/staging_pool.h"
#include "allreduce/transport/ucx_transport.h"
#include "tests/transport/transport_test_util.h"

namespace testbed {
namespace {

using testing::ScopedEnv;

// N connected UCX transports over TCP, one per rank, in this process.
std::vector<std::unique_ptr<UcxTransport>> ConnectedWorld(int world_size) {
  std::vector<std::unique_ptr<UcxTransport>> world;
  std::vector<std::vector<std::byte>> addresses;
  {
    ScopedEnv tls("UCX_TLS", "tcp");
    for (int rank = 0; rank < world_size; ++rank) {
      absl::StatusOr<std::unique_ptr<UcxTransport>> transport = UcxTransport::Create(
          rank, world_size,
          UcxOptions{.wait_timeout = std::chrono::seconds(30),
                     .gpu_path = GpuPathRequest::kStaged});
      EXPECT_TRUE(transport.ok()) << transport.status();
      if (!transport.ok()) return {};
      addresses.push_back((*transport)->WorkerAddress());
      world.push_back(*std::move(transport));
    }
  }
  for (auto& transport : world) {
    const absl::Status connected = transport->Connect(addresses);
    EXPECT_TRUE(connected.ok()) << connected;
    if (!connected.ok()) return {};
  }
  return world;
}

struct RankCounts {
  std::uint64_t leases_in_first = 0;  // staged operations of one iteration
  std::uint64_t allocations_after_last = 0;
  std::uint64_t allocated_bytes = 0;
  std::uint64_t staged_operations = 0;  // leases over all iterations
  std::size_t leased_after = 0;
};

// Runs `name` `iterations` times on fake-device memory, each rank on its own
// thread, checking every iteration's result and that the bytes staged equal
// the payload; returns what each rank's pool did.
std::vector<RankCounts> RunStaged(const std::string& name, int world_size, std::int64_t count,
                                  std::size_t segment, int iterations) {
  const Collective* collective = FindCollective(name);
  EXPECT_NE(collective, nullptr);
  if (collective == nullptr) return {};
  std::vector<std::unique_ptr<UcxTransport>> world = ConnectedWorld(world_size);
  if (world.empty()) return {};
  const DataType type = DataType::kFloat32;
  const std::size_t bytes = static_cast<std::size_t>(count) * ElementSize(type);
  std::vector<RankCounts> counts(world_size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      UcxTransport& transport = *world[rank];
      const MemoryOps& device = MemoryOpsFor(MemoryType::kFakeDevice);
      const Allocation buffer = device.Allocate(bytes);
      std::vector<std::byte> input(bytes), result(bytes);
      FillInput(collective->semantics, world_size, rank, count, type, 0, input.data());
      const Schedule schedule = collective->Build(rank, world_size, count, 0);
      Executor executor(transport);
      for (int i = 0; i < iterations; ++i) {
        device.Upload(buffer.buffer(), input);
        transport.ResetTraffic();
        const absl::Status st = executor.Run(schedule, buffer.buffer(), type, ReduceOp::kSum,
                                             {.segment_bytes = segment});
        ASSERT_TRUE(st.ok()) << "rank " << rank << " iteration " << i << ": " << st;
        std::uint64_t payload = 0;
        for (const PeerTraffic& t : transport.Traffic()) payload += t.bytes_sent + t.bytes_received;
        EXPECT_EQ(transport.StagedBytes(), payload) << "rank " << rank << " iteration " << i;
        device.Download(result, buffer.buffer());
        const Mismatches wrong = CheckRank(collective->semantics, world_size, rank, result.data(),
                                           count, type, ReduceOp::kSum, 0);
        EXPECT_EQ(wrong.count, 0) << "rank " << rank << " iteration " << i << ": " << wrong.first;
        if (i == 0) counts[rank].leases_in_first = transport.staging_stats().leases;
      }
      const StagingPool::Stats stats = transport.staging_stats();
      counts[rank].allocations_after_last = stats.allocations;
      counts[rank].allocated_bytes = stats.allocated_bytes;
      counts[rank].staged_operations = stats.leases;
      counts[rank].leased_after = stats.leased;
    });
  }
  for (std::thread& t : threads) t.join();
  // Closed concurrently, as processes would: a close may need the peer.
  std::vector<std::thread> closers;
  for (auto& transport : world) closers.emplace_back([&transport] { transport.reset(); });
  for (std::thread& t : closers) t.join();
  return counts;
}

// 1,000,003 floats (4 MB): the staged default cuts ring's 1.3 MB steps into
// 256 KiB segments, several in flight at once.
constexpr std::int64_t kCount = 1000003;
constexpr int kIterations = 12;

TEST(UcxStagingTest, BounceBuffersAreBoundedByWhatOneIterationHasInFlight) {
  for (const std::string name : {"ring", "naive", "butterfly"}) {
    for (const std::size_t segment :
         {StagedSegmentBytes(kCount * 4), std::size_t{0}}) {  // the default, whole steps
      SCOPED_TRACE(name + " segment " + std::to_string(segment));
      const std::vector<RankCounts> counts = RunStaged(name, 3, kCount, segment, kIterations);
      ASSERT_EQ(counts.size(), 3u);
      for (const RankCounts& c : counts) {
        // Every staged operation used to allocate its own buffer: 12 times
        // one iteration's operations by the end. How many are in flight at
        // once depends on timing, but never more than one iteration's.
        EXPECT_EQ(c.staged_operations, c.leases_in_first * kIterations);
        EXPECT_GT(c.allocations_after_last, 0u);
        EXPECT_LE(c.allocations_after_last, c.leases_in_first);
        EXPECT_EQ(c.leased_after, 0u);  // all back in the pool
        std::printf("%s segment %zu: %llu buffers (%llu bytes) for %llu staged operations\n",
                    name.c_str(), segment,
                    static_cast<unsigned long long>(c.allocations_after_last),
                    static_cast<unsigned long long>(c.allocated_bytes),
                    static_cast<unsigned long long>(c.staged_operations));
      }
    }
  }
}

TEST(UcxStagingTest, StagedSegmentIsNeverZeroAndFollowsTheAutoBounds) {
  EXPECT_EQ(StagedSegmentBytes(0), std::size_t{256} << 10);
  EXPECT_EQ(StagedSegmentBytes(8), std::size_t{256} << 10);
  EXPECT_EQ(StagedSegmentBytes(std::int64_t{16} << 20), std::size_t{1} << 20);
  EXPECT_EQ(StagedSegmentBytes(std::int64_t{1} << 30), std::size_t{4} << 20);
  for (std::int64_t m : {std::int64_t{4} << 20, std::int64_t{64} << 20}) {
    EXPECT_EQ(StagedSegmentBytes(m), AutoSegmentBytes(m));
  }
}

}  // namespace
}  // namespace testbed
