// The UCX transport's insides, private to allreduce/transport/ and hidden
// behind allreduce/transport/ucx_transport.h, so that code using the
// transport does not see UCX's headers: the RAII owners of the UCP objects
// (context -> worker -> endpoint, allreduce/transport/ucx_objects.cc), the
// operations in flight, and UcxTransport::Impl, the transport itself (set up
// and torn down in allreduce/transport/ucx_transport.cc, its sends, receives
// and waits in allreduce/transport/ucx_operations.cc).
#pragma once

#include <poll.h>
#include <sched.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "allreduce/transport/staging_pool.h"
#include "allreduce/transport/transport.h"
#include "allreduce/transport/ucx_status.h"
#include "allreduce/transport/ucx_transport.h"

namespace testbed {

class UcxTransport::Impl {
 public:
  using Clock = std::chrono::steady_clock;

  // See UcxTransport::Create().
  static absl::StatusOr<std::unique_ptr<Impl>> Create(int rank, int world_size,
                                                      UcxOptions options);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // UcxTransport's public methods, which forward here.
  std::vector<std::byte> WorkerAddress() const { return worker_address_; }
  absl::Status Connect(const std::vector<std::vector<std::byte>>& addresses_by_rank);
  std::string DescribeEndpoint(int peer) const;
  std::uint64_t memory_types() const { return memory_types_; }
  bool device_direct() const { return device_direct_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  absl::Status PostSend(int peer, std::uint64_t tag, ConstBuffer data);
  absl::Status PostRecv(int peer, std::uint64_t tag, MutableBuffer data);
  absl::Status WaitAll();
  absl::StatusOr<std::size_t> WaitAny();
  void ServePeersUntil(const std::atomic<bool>& released);
  std::vector<PeerTraffic> Traffic() const { return traffic_; }
  void ResetTraffic();
  std::uint64_t StagedBytes() const { return staged_bytes_; }
  StagingPool::Stats staging_stats() const { return staging_pool_.stats(); }

 private:
  // The sender's rank travels in the UCX tag above the interface's tag bits.
  static constexpr int kRankBits = 64 - kTagBits;
  static constexpr int kMaxWorldSize = 1 << kRankBits;
  static constexpr ucp_tag_t kFullTagMask = ~ucp_tag_t{0};

  // The longest single sleep on the event fd. Wakeups normally end the sleep
  // early; the cap bounds the cost of a transport that fails to signal.
  static constexpr int kMaxSleepMs = 100;
  // Wakeups in a row that find nothing to progress before the wait stops
  // trusting the event fd, and the longest sleep it then takes instead: it
  // bounds the latency added to a real event while the fd misbehaves.
  static constexpr int kEmptyWakeupsBeforeBackoff = 3;
  static constexpr int kMaxBackoffMs = 10;

  static ucp_tag_t UcxTag(int source_rank, std::uint64_t tag) {
    return (static_cast<ucp_tag_t>(source_rank) << kTagBits) | tag;
  }

  class Context;   // owns a ucp_context_h
  class Worker;    // owns a ucp_worker_h and knows its event fd
  class Endpoint;  // owns a ucp_ep_h to one peer and records its failure

  Impl(int rank, int world_size, UcxOptions options);

  // One posted send or receive, alive until the WaitAll() that ends it.
  // Its address is the user data of the UCX request, so it must not move.
  struct Operation {
    Impl* transport;
    bool is_send;
    int peer;
    std::uint64_t tag;             // the interface's tag, for messages
    std::size_t size;              // bytes posted
    std::size_t index;             // in operations_, what WaitAny() reports
    void* request = nullptr;       // UCX request, released after completion
    bool done = false;             // set when UCX reports completion
    ucs_status_t status = UCS_OK;  // UCX's verdict, valid when done
    std::size_t received = 0;      // bytes that arrived, for receives
    bool short_message = false;    // a receive got fewer bytes than posted
    // Memory UCX cannot reach travels through host memory: a send's bytes
    // are copied out before posting, a receive's are delivered, when the
    // receive is reported, into `deliver_to` by the memory's own operations.
    // The bounce buffer goes back to the pool once it is no longer needed.
    StagingPool::Lease staging{};
    MutableBuffer deliver_to{};
  };

  // FailedPrecondition once an earlier failure made the transport unusable.
  absl::Status BrokenError() const;
  absl::Status CheckPost(int peer, std::uint64_t tag) const;
  // After posting: an operation UCX failed at once makes the transport
  // unusable (Abort) and is returned; anything else is OK.
  absl::Status FailIfRefused(const Operation& op);
  // Records a completed operation and counts its payload.
  void Complete(Operation& op, ucs_status_t status, std::size_t length);
  // "send of 8 bytes to rank 3 (tag 7)", for messages.
  static std::string Describe(const Operation& op);
  // The error of a completed operation, naming the peer; OK on success.
  absl::Status OperationError(const Operation& op) const;
  // Whether an operation is pending with a peer whose endpoint has failed,
  // and the error that names that peer.
  bool HasPendingWithLostPeer() const;
  absl::Status LostPeerError() const;
  // DeadlineExceeded, listing what WaitAll() was still waiting for.
  absl::Status TimeoutError() const;
  // After a failure: cancels what is pending, force-closes the endpoints and
  // waits (bounded) until UCX no longer touches the callers' buffers.
  void Abort(absl::Status cause);
  // Frees the UCX requests of all operations and forgets the operations.
  void ReleaseRequests();
  // Flushes, all at once, every used endpoint that has not failed, waiting
  // for each until `deadline` at most.
  void FlushUsedEndpoints(std::chrono::steady_clock::time_point deadline);
  // Progresses the worker until done(), an operation fails, a peer with
  // something pending is lost, or the wait times out; on failure aborts
  // (see Abort) and returns the error naming the peer.
  template <typename Done>
  absl::Status ProgressUntil(Done done);
  // Whether a buffer of `memory` goes through host memory: memory host code
  // cannot touch, unless it is cuda memory on the direct path.
  bool Staged(MemoryType memory) const;
  // The memory type UCX is told a (non-staged) buffer has.
  static ucs_memory_type_t UcxMemoryType(MemoryType memory);
  // Hands a staged receive's bytes to the caller's memory, once.
  void Deliver(Operation& op);

  static void SendCallback(void* request, ucs_status_t status, void* user_data);
  static void RecvCallback(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                           void* user_data);

  const int rank_;
  const int world_size_;
  const UcxOptions options_;
  // Bounce buffers; declared before the UCX objects, so it outlives them and
  // any request UCX still finishes on its own after an abort.
  StagingPool staging_pool_;
  std::uint64_t staged_bytes_ = 0;  // see StagedBytes()
  // Declared in lifecycle order, so they are destroyed in reverse.
  std::unique_ptr<Context> context_;
  std::unique_ptr<Worker> worker_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;  // by rank; null for self
  std::vector<std::byte> worker_address_;
  std::uint64_t memory_types_ = 0;  // what UCX reported, see memory_types()
  bool device_direct_ = false;      // cuda buffers go to UCX as they are

  std::deque<Operation> operations_;  // posted since the last WaitAll()
  std::size_t completed_ = 0;         // how many of operations_ are done
  std::deque<std::size_t> finished_;  // indices completed, not yet reported by WaitAny()
  std::size_t reported_ = 0;          // operations WaitAny() has reported
  bool operation_failed_ = false;     // some completed operation has an error
  std::atomic<int> lost_peers_{0};    // endpoints that reported failure
  absl::Status broken_;               // set once a failure made this unusable
  std::vector<PeerTraffic> traffic_;  // by rank
};

// ---------------------------------------------------------------------------
// RAII owners of the UCP objects: context -> worker -> endpoint.

class UcxTransport::Impl::Context {
 public:
  static absl::StatusOr<std::unique_ptr<Context>> Create(int world_size);

  ~Context() { ucp_cleanup(context_); }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  ucp_context_h get() const { return context_; }

  // The memory types this context can move (a bit per ucs_memory_type_t).
  absl::StatusOr<std::uint64_t> MemoryTypes() const;

 private:
  explicit Context(ucp_context_h context) : context_(context) {}
  const ucp_context_h context_;
};

class UcxTransport::Impl::Worker {
 public:
  static absl::StatusOr<std::unique_ptr<Worker>> Create(const Context& context);

  ~Worker() { ucp_worker_destroy(worker_); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  ucp_worker_h get() const { return worker_; }

  absl::StatusOr<std::vector<std::byte>> Address() const;

  // Progresses the worker until done() holds. Spins while UCX reports
  // progress and for `idle_spins` idle rounds after it, then polls with a
  // sched_yield() between polls for up to `yield_spin` (unless yields are
  // paused, see UcxOptions::slow_yield), then arms the worker and sleeps on
  // its event fd, so an idle wait costs no CPU. Returns
  // DeadlineExceeded (with an empty message; the caller knows what it waited
  // for) if `deadline` passes first.
  //
  // The event fd can stay readable with nothing to progress: UCX 1.13 over
  // TCP keeps a socket's EPOLLOUT armed while a peer has not yet answered
  // the connection handshake (the peer has not progressed its worker since
  // Connect()). Sleeping on the fd would then return at once, forever, so
  // after a few such empty wakeups this sleeps without it, backing off.
  template <typename Done>
  absl::Status ProgressUntil(Done done, Clock::time_point deadline, int idle_spins,
                             std::chrono::microseconds yield_spin,
                             std::chrono::microseconds slow_yield = {},
                             std::chrono::milliseconds yield_pause = {}) {
    int idle = 0;           // idle progress calls since the last useful one
    Clock::time_point idle_since = Clock::now();  // when the current idle stretch began
    bool woke = false;      // the last sleep ended because the fd was ready
    int empty_wakeups = 0;  // consecutive wakeups that found nothing to do
    while (!done()) {
      // Checked on every round, not just idle ones: a worker can stay busy
      // (retrying a connection, say) without completing anything.
      const Clock::time_point now = Clock::now();
      if (now >= deadline) return absl::DeadlineExceededError("");
      if (ucp_worker_progress(worker_) != 0) {
        idle = 0;
        idle_since = now;
        woke = false;
        empty_wakeups = 0;
        continue;
      }
      if (++idle < idle_spins) continue;
      if (now - idle_since < yield_spin && now >= yields_paused_until_) {
        sched_yield();  // let a peer sharing this core run, then poll again
        const Clock::time_point back = Clock::now();
        if (back - now > slow_yield) yields_paused_until_ = back + yield_pause;
        continue;
      }
      idle = 0;
      idle_since = now;
      if (woke) ++empty_wakeups;
      woke = false;
      const std::int64_t left_ms =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
      if (empty_wakeups > kEmptyWakeupsBeforeBackoff) {
        const int backoff_ms = std::min(empty_wakeups - kEmptyWakeupsBeforeBackoff, kMaxBackoffMs);
        if (empty_wakeups < kEmptyWakeupsBeforeBackoff + kMaxBackoffMs) ++empty_wakeups;
        poll(nullptr, 0, static_cast<int>(std::min<std::int64_t>(left_ms, backoff_ms)));
        continue;
      }
      // Arming fails with BUSY when events arrived since the last progress
      // call; they must be progressed first or the sleep could miss them.
      ucs_status_t status = ucp_worker_arm(worker_);
      if (status == UCS_ERR_BUSY) continue;
      if (status != UCS_OK) return UcsStatusToStatus(status, "ucp_worker_arm");
      pollfd fd{.fd = event_fd_, .events = POLLIN, .revents = 0};
      const int ready =
          poll(&fd, 1, static_cast<int>(std::min<std::int64_t>(left_ms, kMaxSleepMs)));
      if (ready < 0 && errno != EINTR) {
        return absl::InternalError(
            absl::StrCat("poll on the UCX event fd: ", std::strerror(errno)));
      }
      woke = ready > 0;
    }
    return absl::OkStatus();
  }

  // The one way to wait for a single UCX request: NULL means it completed at
  // once, UCS_PTR_IS_ERR that it failed, anything else is a request to
  // progress until it completes (then released here).
  ucs_status_t Wait(ucs_status_ptr_t request, Clock::time_point deadline, int idle_spins,
                    std::chrono::microseconds yield_spin = {});

 private:
  explicit Worker(ucp_worker_h worker) : worker_(worker) {}
  const ucp_worker_h worker_;
  int event_fd_ = -1;  // owned by the worker
  // Until then waits sleep instead of yielding: a recent yield was slow.
  Clock::time_point yields_paused_until_{};
};

class UcxTransport::Impl::Endpoint {
 public:
  // `lost_peers` is bumped (from UCX's error callback) when the peer fails.
  static absl::StatusOr<std::unique_ptr<Endpoint>> Create(Worker& worker, int peer,
                                                          std::span<const std::byte> address,
                                                          bool peer_error_handling,
                                                          std::atomic<int>* lost_peers);

  // Normally closed through StartClose(); this is the fallback (e.g. after a
  // failed Connect()).
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  ucp_ep_h get() const { return ep_; }
  // Whether any operation with the peer was posted: only then can a close
  // have anything to flush (our sends, or protocol replies to its sends).
  bool used() const { return used_; }
  void MarkUsed() { used_ = true; }
  // UCS_OK until UCX reports that the peer is unreachable.
  ucs_status_t failure() const { return failure_.load(std::memory_order_acquire); }

  // Starts flushing what was posted on the endpoint; returns the request to
  // Worker::Wait() on.
  ucs_status_ptr_t StartFlush();

  // Starts a forced close, which needs nothing from the peer and is the only
  // close UCX allows once an endpoint has failed; returns the request to
  // Worker::Wait() on. Pending operations on the endpoint end as cancelled.
  ucs_status_ptr_t StartClose();

 private:
  Endpoint(Worker& worker, std::atomic<int>* lost_peers)
      : worker_(worker), lost_peers_(lost_peers) {}

  static void OnError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status);

  Worker& worker_;                      // outlives the endpoint
  std::atomic<int>* const lost_peers_;  // the transport's counter
  ucp_ep_h ep_ = nullptr;
  bool used_ = false;
  std::atomic<ucs_status_t> failure_{UCS_OK};  // set by OnError, maybe off-thread
};

}  // namespace testbed
