// At most a stated number of calls served at once by one daemon, across its
// services (testbed-server --max-calls).
//
// gRPC's synchronous server gives every call in progress a thread of its own,
// and a stream held open (a pull waiting on a step, a worker's control stream)
// keeps it. Without a bound, a client that opens streams and never finishes
// them grows the daemon's threads and memory until it fails for everyone. A
// call over the limit is refused at once with RESOURCE_EXHAUSTED, naming the
// limit and the flag that raises it; the calls already admitted go on.
//
// Thread-safety: Admit() and the admissions' destructors may run on any thread.
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/status/statusor.h"

namespace testbed {

class CallLimiter {
 public:
  // Enough for 256 workers, each with a control stream and a push and a pull
  // stream open on every shard, several times over.
  static constexpr std::int64_t kDefaultMaxCalls = 4096;

  explicit CallLimiter(std::int64_t max_calls = kDefaultMaxCalls) : max_calls_(max_calls) {}
  CallLimiter(const CallLimiter&) = delete;
  CallLimiter& operator=(const CallLimiter&) = delete;

  // One admitted call: the limiter counts it until the admission is destroyed.
  class Admission {
   public:
    Admission(Admission&& other) noexcept : limiter_(other.limiter_) { other.limiter_ = nullptr; }
    Admission& operator=(Admission&&) = delete;
    ~Admission();

   private:
    friend class CallLimiter;
    explicit Admission(CallLimiter* limiter) : limiter_(limiter) {}
    CallLimiter* limiter_;
  };

  // An admission for one more call, or RESOURCE_EXHAUSTED when `max_calls`
  // are already in progress.
  absl::StatusOr<Admission> Admit();

  std::int64_t max_calls() const { return max_calls_; }
  std::int64_t in_progress() const { return in_progress_.load(); }

 private:
  const std::int64_t max_calls_;
  std::atomic<std::int64_t> in_progress_{0};
};

}  // namespace testbed
