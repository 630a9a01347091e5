#include "allreduce/transport/staging_pool.h"

#include <bit>

namespace testbed {

MemoryType StagingMemoryFor(MemoryType memory) {
  return memory == MemoryType::kCuda ? MemoryType::kPinned : MemoryType::kHost;
}

std::size_t StagingPool::ClassOf(std::size_t bytes) {
  return std::bit_ceil(bytes < kSmallestClass ? kSmallestClass : bytes);
}

StagingPool::Lease& StagingPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    reset();
    pool_ = std::exchange(other.pool_, nullptr);
    allocation_ = std::move(other.allocation_);
    buffer_ = std::exchange(other.buffer_, MutableBuffer{});
  }
  return *this;
}

void StagingPool::Lease::reset() {
  if (pool_ == nullptr) return;
  std::exchange(pool_, nullptr)->Return(std::move(allocation_));
  allocation_ = Allocation();
  buffer_ = MutableBuffer{};
}

StagingPool::Lease StagingPool::LeaseLocked(Class& of, const Key& key, std::size_t bytes) {
  Lease lease;
  if (of.free.empty()) {
    // Zeroed by the allocator: its pages are touched here, once, not in a
    // timed copy.
    lease.allocation_ = MemoryOpsFor(key.first).Allocate(key.second);
    ++stats_.allocations;
    stats_.allocated_bytes += key.second;
  } else {
    lease.allocation_ = std::move(of.free.back());
    of.free.pop_back();
  }
  ++of.leased;
  ++stats_.leased;
  ++stats_.leases;
  lease.pool_ = this;
  lease.buffer_ = lease.allocation_.buffer().subspan(0, bytes);
  return lease;
}

StagingPool::Lease StagingPool::Acquire(std::size_t bytes, MemoryType memory) {
  const Key key{StagingMemoryFor(memory), ClassOf(bytes)};
  std::lock_guard lock(mutex_);
  return LeaseLocked(classes_[key], key, bytes);
}

std::optional<StagingPool::Lease> StagingPool::AcquireWithin(
    std::size_t bytes, MemoryType memory, std::size_t limit,
    std::chrono::steady_clock::time_point deadline) {
  const Key key{StagingMemoryFor(memory), ClassOf(bytes)};
  std::unique_lock lock(mutex_);
  Class& of = classes_[key];  // std::map: the reference stays valid
  if (!returned_.wait_until(lock, deadline, [&] { return limit == 0 || of.leased < limit; })) {
    return std::nullopt;
  }
  return LeaseLocked(of, key, bytes);
}

void StagingPool::Return(Allocation allocation) {
  {
    std::lock_guard lock(mutex_);
    Class& of = classes_[{allocation.buffer().memory, allocation.size()}];
    --of.leased;
    --stats_.leased;
    of.free.push_back(std::move(allocation));
  }
  returned_.notify_all();
}

StagingPool::Stats StagingPool::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace testbed
