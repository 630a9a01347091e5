// StagingPool (allreduce/transport/staging_pool.h): bounce buffers by size
// class, allocated once and reused; a bounded lease waits for a buffer to come
// back instead of allocating one more.
#include "allreduce/transport/staging_pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace testbed {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(StagingPoolTest, StagesCudaInPinnedAndEverythingElseInHost) {
  EXPECT_EQ(StagingMemoryFor(MemoryType::kCuda), MemoryType::kPinned);
  EXPECT_EQ(StagingMemoryFor(MemoryType::kFakeDevice), MemoryType::kHost);
  EXPECT_EQ(StagingMemoryFor(MemoryType::kHost), MemoryType::kHost);
}

TEST(StagingPoolTest, ClassesArePowersOfTwoFromTheSmallest) {
  EXPECT_EQ(StagingPool::ClassOf(0), StagingPool::kSmallestClass);
  EXPECT_EQ(StagingPool::ClassOf(1), StagingPool::kSmallestClass);
  EXPECT_EQ(StagingPool::ClassOf(4097), 8192u);
  EXPECT_EQ(StagingPool::ClassOf(std::size_t{1} << 20), std::size_t{1} << 20);
  EXPECT_EQ(StagingPool::ClassOf((std::size_t{1} << 20) + 1), std::size_t{2} << 20);
}

TEST(StagingPoolTest, ALeaseIsExactlyTheBytesAskedForInHostAccessibleMemory) {
  StagingPool pool;
  StagingPool::Lease lease = pool.Acquire(5000, MemoryType::kFakeDevice);
  EXPECT_EQ(lease.buffer().size, 5000u);
  EXPECT_EQ(lease.buffer().memory, MemoryType::kHost);
  EXPECT_TRUE(HostAccessible(lease.buffer().memory));
  lease.host()[4999] = std::byte{7};  // host code may touch it
  EXPECT_FALSE(lease.empty());
  lease.reset();
  EXPECT_TRUE(lease.empty());
}

// The pool keeps as many buffers of a class as were ever out at once, and
// allocates nothing more however often they are leased.
TEST(StagingPoolTest, ManyIterationsAllocateOnlyTheMostLeasedAtOnce) {
  StagingPool pool;
  for (int iteration = 0; iteration < 1000; ++iteration) {
    std::vector<StagingPool::Lease> leases;
    for (std::size_t bytes : {std::size_t{100}, std::size_t{4096}, std::size_t{70000},
                              std::size_t{65536}, std::size_t{1} << 20}) {
      leases.push_back(pool.Acquire(bytes, MemoryType::kFakeDevice));
    }
  }
  const StagingPool::Stats stats = pool.stats();
  // 100 and 4096 share the smallest class, so do 65536 and 70000 not (64 KiB, 128 KiB).
  EXPECT_EQ(stats.allocations, 5u);
  EXPECT_EQ(stats.allocated_bytes, 4096u * 2 + 131072 + 65536 + (1u << 20));
  EXPECT_EQ(stats.leases, 5000u);
  EXPECT_EQ(stats.leased, 0u);
}

TEST(StagingPoolTest, AMovedLeaseReturnsItsBufferOnce) {
  StagingPool pool;
  StagingPool::Lease a = pool.Acquire(10, MemoryType::kHost);
  StagingPool::Lease b = std::move(a);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(pool.stats().leased, 1u);
  b = StagingPool::Lease();
  EXPECT_EQ(pool.stats().leased, 0u);
  StagingPool::Lease c = pool.Acquire(10, MemoryType::kHost);
  EXPECT_EQ(pool.stats().allocations, 1u);
}

TEST(StagingPoolTest, ABoundedLeaseWaitsForABufferToComeBack) {
  StagingPool pool;
  std::optional<StagingPool::Lease> first =
      pool.AcquireWithin(1000, MemoryType::kHost, 1, steady_clock::now() + milliseconds(10));
  ASSERT_TRUE(first.has_value());
  // The class is at its limit: no buffer comes back in time.
  EXPECT_FALSE(pool.AcquireWithin(1000, MemoryType::kHost, 1,
                                  steady_clock::now() + milliseconds(20))
                   .has_value());
  // Another class is not.
  EXPECT_TRUE(pool.AcquireWithin(100000, MemoryType::kHost, 1,
                                 steady_clock::now() + milliseconds(10))
                  .has_value());
  std::thread giver([&] {
    std::this_thread::sleep_for(milliseconds(20));
    first.reset();
  });
  std::optional<StagingPool::Lease> second = pool.AcquireWithin(
      1000, MemoryType::kHost, 1, steady_clock::now() + std::chrono::seconds(10));
  giver.join();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(pool.stats().allocations, 2u);  // the 1000's and the 100000's, reused
}

}  // namespace
}  // namespace testbed
