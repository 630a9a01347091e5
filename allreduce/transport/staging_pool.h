// Bounce buffers for memory host code cannot touch (cuda, fake-device): a
// transfer that must go through host memory (UCX without CUDA, gRPC) leases
// one, copies into or out of it with the device memory's own operations, and
// gives it back. Buffers are allocated once per size class - powers of two
// from kSmallestClass - through the staging memory's own operations (pinned
// host memory for cuda, so the copies run at the bus's full speed; plain host
// memory for fake-device) and reused: a pool holds as many buffers of a class
// as were ever leased at once, so a collective run again and again allocates
// at most what one run has in flight at once (usually all in the warm-up),
// never a buffer per transfer.
//
// Thread-safety: Acquire and the return of a Lease may happen on any thread
// (the parameter server client leases on its writer threads, gRPC returns on
// its own). The pool must outlive its leases.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "allreduce/memory.h"

namespace testbed {

// Where bytes of `memory` are staged on their way through host-only code:
// pinned memory for cuda, host memory for everything else.
MemoryType StagingMemoryFor(MemoryType memory);

class StagingPool {
 public:
  // Buffers smaller than this are not worth a class of their own.
  static constexpr std::size_t kSmallestClass = std::size_t{4} << 10;

  struct Stats {
    std::uint64_t allocations = 0;      // buffers allocated, ever
    std::uint64_t allocated_bytes = 0;  // their sizes (the classes), summed
    std::uint64_t leases = 0;           // Acquire()s that returned a buffer
    std::size_t leased = 0;             // buffers out now
  };

  // A buffer of the pool, back in it when the lease is destroyed (or reset).
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { reset(); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

    // The leased bytes: exactly what Acquire() asked for, host-accessible.
    MutableBuffer buffer() const { return buffer_; }
    std::span<std::byte> host() const { return {buffer_.data, buffer_.size}; }
    bool empty() const { return pool_ == nullptr; }
    // Gives the buffer back now.
    void reset();

   private:
    friend class StagingPool;
    StagingPool* pool_ = nullptr;
    Allocation allocation_;  // the whole class's buffer
    MutableBuffer buffer_;   // its first `bytes`
  };

  StagingPool() = default;
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A buffer of at least `bytes` in StagingMemoryFor(`memory`), allocating
  // one only when none of its class is free. Never blocks.
  Lease Acquire(std::size_t bytes, MemoryType memory);

  // Like Acquire, but while `limit` buffers of the class are leased waits
  // for one to come back, until `deadline` (nullopt then).
  std::optional<Lease> AcquireWithin(std::size_t bytes, MemoryType memory, std::size_t limit,
                                     std::chrono::steady_clock::time_point deadline);

  Stats stats() const;

  // The class a request of `bytes` is served from.
  static std::size_t ClassOf(std::size_t bytes);

 private:
  using Key = std::pair<MemoryType, std::size_t>;  // staging memory, class
  struct Class {
    std::vector<Allocation> free;
    std::size_t leased = 0;
  };
  Lease LeaseLocked(Class& of, const Key& key, std::size_t bytes);
  void Return(Allocation allocation);

  mutable std::mutex mutex_;
  std::condition_variable returned_;  // a buffer came back
  std::map<Key, Class> classes_;
  Stats stats_;
};

}  // namespace testbed
