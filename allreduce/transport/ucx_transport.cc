#include "allreduce/transport/ucx_transport.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "allreduce/transport/ucx_status.h"

namespace testbed {
namespace {

using Clock = std::chrono::steady_clock;

// The sender's rank travels in the UCX tag above the interface's tag bits.
constexpr int kRankBits = 64 - kTagBits;
constexpr int kMaxWorldSize = 1 << kRankBits;
constexpr ucp_tag_t kFullTagMask = ~ucp_tag_t{0};

// The longest single sleep on the event fd. Wakeups normally end the sleep
// early; the cap bounds the cost of a transport that fails to signal.
constexpr int kMaxSleepMs = 100;
// Wakeups in a row that find nothing to progress before the wait stops
// trusting the event fd, and the longest sleep it then takes instead: it
// bounds the latency added to a real event while the fd misbehaves.
constexpr int kEmptyWakeupsBeforeBackoff = 3;
constexpr int kMaxBackoffMs = 10;

ucp_tag_t UcxTag(int source_rank, std::uint64_t tag) {
  return (static_cast<ucp_tag_t>(source_rank) << kTagBits) | tag;
}

}  // namespace

// ---------------------------------------------------------------------------
// RAII owners of the UCP objects: context -> worker -> endpoint.

class UcxTransport::Context {
 public:
  static absl::StatusOr<std::unique_ptr<Context>> Create(int world_size) {
    // UCX reads its UCX_* environment variables (UCX_TLS, ...) here, so each
    // transport sees the environment as it is when it is created.
    ucp_config_t* config = nullptr;
    ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
    if (status != UCS_OK) return UcsStatusToStatus(status, "ucp_config_read");

    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                        UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 0;  // one worker, one thread at a time
    params.estimated_num_eps = static_cast<std::size_t>(world_size);
    ucp_context_h context = nullptr;
    status = ucp_init(&params, config, &context);
    ucp_config_release(config);
    if (status != UCS_OK) return UcsStatusToStatus(status, "ucp_init");
    return std::unique_ptr<Context>(new Context(context));
  }

  ~Context() { ucp_cleanup(context_); }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  ucp_context_h get() const { return context_; }

  // The memory types this context can move (a bit per ucs_memory_type_t).
  absl::StatusOr<std::uint64_t> MemoryTypes() const {
    ucp_context_attr_t attr{};
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    ucs_status_t status = ucp_context_query(context_, &attr);
    if (status != UCS_OK) return UcsStatusToStatus(status, "ucp_context_query");
    return static_cast<std::uint64_t>(attr.memory_types);
  }

 private:
  explicit Context(ucp_context_h context) : context_(context) {}
  const ucp_context_h context_;
};

class UcxTransport::Worker {
 public:
  static absl::StatusOr<std::unique_ptr<Worker>> Create(const Context& context) {
    ucp_worker_params_t params{};
    params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    // The transport may be created on one thread and used on another, never
    // on two at once.
    params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    ucp_worker_h worker = nullptr;
    ucs_status_t status = ucp_worker_create(context.get(), &params, &worker);
    if (status != UCS_OK) return UcsStatusToStatus(status, "ucp_worker_create");
    auto owner = std::unique_ptr<Worker>(new Worker(worker));
    status = ucp_worker_get_efd(worker, &owner->event_fd_);
    if (status != UCS_OK) return UcsStatusToStatus(status, "ucp_worker_get_efd");
    return owner;
  }

  ~Worker() { ucp_worker_destroy(worker_); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  ucp_worker_h get() const { return worker_; }

  absl::StatusOr<std::vector<std::byte>> Address() const {
    ucp_address_t* address = nullptr;
    std::size_t length = 0;
    ucs_status_t status = ucp_worker_get_address(worker_, &address, &length);
    if (status != UCS_OK) return UcsStatusToStatus(status, "ucp_worker_get_address");
    const auto* bytes = reinterpret_cast<const std::byte*>(address);
    std::vector<std::byte> copy(bytes, bytes + length);
    ucp_worker_release_address(worker_, address);
    return copy;
  }

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
                    std::chrono::microseconds yield_spin = {}) {
    if (request == nullptr) return UCS_OK;
    if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
    absl::Status waited = ProgressUntil(
        [&] { return ucp_request_check_status(request) != UCS_INPROGRESS; }, deadline, idle_spins,
        yield_spin);
    ucs_status_t status = ucp_request_check_status(request);
    // Released even if still in progress: UCX then finishes it on its own.
    ucp_request_free(request);
    if (!waited.ok() && status == UCS_INPROGRESS) return UCS_ERR_TIMED_OUT;
    return status;
  }

 private:
  explicit Worker(ucp_worker_h worker) : worker_(worker) {}
  const ucp_worker_h worker_;
  int event_fd_ = -1;  // owned by the worker
  // Until then waits sleep instead of yielding: a recent yield was slow.
  Clock::time_point yields_paused_until_{};
};

class UcxTransport::Endpoint {
 public:
  // `lost_peers` is bumped (from UCX's error callback) when the peer fails.
  static absl::StatusOr<std::unique_ptr<Endpoint>> Create(Worker& worker, int peer,
                                                          std::span<const std::byte> address,
                                                          bool peer_error_handling,
                                                          std::atomic<int>* lost_peers) {
    auto owner = std::unique_ptr<Endpoint>(new Endpoint(worker, lost_peers));
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(address.data());
    params.err_mode = peer_error_handling ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    params.err_handler.cb = &Endpoint::OnError;
    params.err_handler.arg = owner.get();  // stable: the Endpoint never moves
    ucs_status_t status = ucp_ep_create(worker.get(), &params, &owner->ep_);
    if (status != UCS_OK) {
      return UcsStatusToStatus(status, absl::StrCat("creating the endpoint to rank ", peer));
    }
    return owner;
  }

  // Normally closed through StartClose(); this is the fallback (e.g. after a
  // failed Connect()).
  ~Endpoint() {
    if (ep_ == nullptr) return;
    worker_.Wait(StartClose(), Clock::now() + std::chrono::seconds(1), 1);
  }
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
  ucs_status_ptr_t StartFlush() {
    ucp_request_param_t params{};
    return ucp_ep_flush_nbx(ep_, &params);
  }

  // Starts a forced close, which needs nothing from the peer and is the only
  // close UCX allows once an endpoint has failed; returns the request to
  // Worker::Wait() on. Pending operations on the endpoint end as cancelled.
  ucs_status_ptr_t StartClose() {
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    params.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t request = ucp_ep_close_nbx(ep_, &params);
    ep_ = nullptr;
    return request;
  }

 private:
  Endpoint(Worker& worker, std::atomic<int>* lost_peers)
      : worker_(worker), lost_peers_(lost_peers) {}

  static void OnError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
    auto* self = static_cast<Endpoint*>(arg);
    ucs_status_t expected = UCS_OK;
    if (self->failure_.compare_exchange_strong(expected, status, std::memory_order_acq_rel)) {
      self->lost_peers_->fetch_add(1, std::memory_order_release);
    }
  }

  Worker& worker_;                      // outlives the endpoint
  std::atomic<int>* const lost_peers_;  // the transport's counter
  ucp_ep_h ep_ = nullptr;
  bool used_ = false;
  std::atomic<ucs_status_t> failure_{UCS_OK};  // set by OnError, maybe off-thread
};

// ---------------------------------------------------------------------------

UcxTransport::UcxTransport(int rank, int world_size, UcxOptions options)
    : rank_(rank), world_size_(world_size), options_(options), traffic_(world_size) {}

absl::StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::Create(int rank, int world_size,
                                                                   UcxOptions options) {
  if (world_size < 1 || world_size > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size ", world_size, " is outside [1, ", kMaxWorldSize, "]"));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is outside a world of ", world_size));
  }
  auto transport = std::unique_ptr<UcxTransport>(new UcxTransport(rank, world_size, options));
  absl::StatusOr<std::unique_ptr<Context>> context = Context::Create(world_size);
  if (!context.ok()) return context.status();
  transport->context_ = *std::move(context);
  absl::StatusOr<std::uint64_t> memory_types = transport->context_->MemoryTypes();
  if (!memory_types.ok()) return memory_types.status();
  transport->memory_types_ = *memory_types;
  // The gate on what UCX reports now, not on how it was built (see
  // ResolveGpuPath): refused here, a direct request never reaches a send.
  absl::StatusOr<std::string> path =
      ResolveGpuPath(options.gpu_path, MemoryType::kCuda, *memory_types);
  if (!path.ok()) return path.status();
  transport->device_direct_ = *path == "direct";
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(*transport->context_);
  if (!worker.ok()) return worker.status();
  transport->worker_ = *std::move(worker);
  absl::StatusOr<std::vector<std::byte>> address = transport->worker_->Address();
  if (!address.ok()) return address.status();
  transport->worker_address_ = *std::move(address);
  return transport;
}

UcxTransport::~UcxTransport() {
  if (!operations_.empty() && broken_.ok()) {
    Abort(absl::CancelledError("transport destroyed with operations pending"));
  }
  // Flush, on every endpoint that carried anything and all at once, what is
  // still owed to the peer (our eager sends, replies to its rendezvous
  // sends); then force-close every endpoint, which needs nothing more from
  // the peer. Unused endpoints are not flushed: their connection may never
  // have completed, and a flush would wait for the peer to complete it.
  const Clock::time_point deadline = Clock::now() + options_.close_timeout;
  // A flush that fails or times out here has nobody left to report to.
  if (broken_.ok()) FlushUsedEndpoints(deadline);
  for (std::unique_ptr<Endpoint>& endpoint : endpoints_) {
    if (endpoint != nullptr && endpoint->get() != nullptr) {
      worker_->Wait(endpoint->StartClose(), deadline, options_.idle_spins);
    }
  }
  endpoints_.clear();
  worker_.reset();
  context_.reset();
}

void UcxTransport::FlushUsedEndpoints(Clock::time_point deadline) {
  std::vector<ucs_status_ptr_t> flushing;
  for (const std::unique_ptr<Endpoint>& endpoint : endpoints_) {
    if (endpoint != nullptr && endpoint->get() != nullptr && endpoint->used() &&
        endpoint->failure() == UCS_OK) {
      flushing.push_back(endpoint->StartFlush());
    }
  }
  // Every request is waited for (and released), also after a failure.
  for (ucs_status_ptr_t request : flushing) worker_->Wait(request, deadline, options_.idle_spins);
}

void UcxTransport::ServePeersUntil(const std::atomic<bool>& released) {
  // No deadline of its own: the verdict, or the daemon's end, releases it.
  const auto is_released = [&] { return released.load(std::memory_order_acquire); };
  while (!is_released()) {
    const absl::Status served = worker_->ProgressUntil(
        is_released, Clock::now() + std::chrono::hours(1), options_.idle_spins,
        std::chrono::microseconds(0));
    // The event fd failed: poll UCX on a timer rather than spin on it.
    if (!served.ok() && !absl::IsDeadlineExceeded(served)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kMaxSleepMs));
    }
  }
}

absl::Status UcxTransport::Connect(const std::vector<std::vector<std::byte>>& addresses_by_rank) {
  if (!endpoints_.empty()) return absl::FailedPreconditionError("Connect() was already called");
  if (static_cast<int>(addresses_by_rank.size()) != world_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", addresses_by_rank.size(), " addresses for a world of ", world_size_));
  }
  std::vector<std::unique_ptr<Endpoint>> endpoints(world_size_);
  for (int peer = 0; peer < world_size_; ++peer) {
    if (peer == rank_) continue;
    if (addresses_by_rank[peer].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("no address for rank ", peer));
    }
    absl::StatusOr<std::unique_ptr<Endpoint>> endpoint = Endpoint::Create(
        *worker_, peer, addresses_by_rank[peer], options_.peer_error_handling, &lost_peers_);
    if (absl::IsUnavailable(endpoint.status()) && options_.peer_error_handling) {
      // The usual cause: UCX_TLS allows only shared memory, which cannot
      // detect a dead peer, so UCX refuses it under peer error handling.
      return absl::UnavailableError(absl::StrCat(
          endpoint.status().message(),
          " (with peer error handling on, UCX uses only transports that detect peer failure;"
          " in UCX 1.13 shared memory does not: allow tcp in UCX_TLS, or turn"
          " UcxOptions::peer_error_handling off)"));
    }
    if (!endpoint.ok()) return endpoint.status();
    endpoints[peer] = *std::move(endpoint);
  }
  endpoints_ = std::move(endpoints);
  return absl::OkStatus();
}

std::string UcxTransport::DescribeEndpoint(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(endpoints_.size()) || endpoints_[peer] == nullptr ||
      endpoints_[peer]->get() == nullptr) {
    return "";
  }
  char* text = nullptr;
  std::size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  if (stream == nullptr) return "";
  ucp_ep_print_info(endpoints_[peer]->get(), stream);
  std::fclose(stream);
  std::string description(text, length);
  std::free(text);
  return description;
}

absl::Status UcxTransport::BrokenError() const {
  return absl::FailedPreconditionError(
      absl::StrCat("the UCX transport of rank ", rank_,
                   " is unusable after an earlier failure: ", broken_.message()));
}

absl::Status UcxTransport::CheckPost(int peer, std::uint64_t tag) const {
  if (!broken_.ok()) return BrokenError();
  if (endpoints_.empty()) {
    return absl::FailedPreconditionError("Connect() must be called before posting");
  }
  if (peer < 0 || peer >= world_size_ || peer == rank_) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, " cannot exchange with peer ",
                                                   peer, " in a world of ", world_size_));
  }
  if (tag > kMaxTag) {
    return absl::InvalidArgumentError(absl::StrCat("tag ", tag, " exceeds ", kTagBits, " bits"));
  }
  return absl::OkStatus();
}

absl::Status UcxTransport::PostSend(int peer, std::uint64_t tag, ConstBuffer data) {
  // A bad argument is refused before UCX sees it, so nothing changes.
  if (absl::Status status = CheckPost(peer, tag); !status.ok()) return status;
  endpoints_[peer]->MarkUsed();
  Operation& op = operations_.emplace_back(Operation{.transport = this,
                                                     .is_send = true,
                                                     .peer = peer,
                                                     .tag = tag,
                                                     .size = data.size,
                                                     .index = operations_.size()});
  if (Staged(data.memory)) {
    // UCX is given host memory only (Debian's has no device transports;
    // handed a device pointer it crashes): stage. Progress first: a send
    // posted just before (the segment before this one) may have its
    // rendezvous reply waiting, and its bytes should be on the wire while
    // this one is copied down, not after.
    ucp_worker_progress(worker_->get());
    op.staging = staging_pool_.Acquire(data.size, data.memory);
    MemoryOpsFor(data.memory).Download(op.staging.host(), data);
    staged_bytes_ += data.size;
    data = op.staging.buffer();
  }
  ucp_request_param_t params{};
  params.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  params.cb.send = &UcxTransport::SendCallback;
  params.user_data = &op;
  // Said on every request: UCX 1.13's own lookup can take a device pointer
  // for host memory (a statically linked cudart escapes its hooks).
  params.memory_type = UcxMemoryType(data.memory);
  ucs_status_ptr_t request = ucp_tag_send_nbx(endpoints_[peer]->get(), data.data, data.size,
                                              UcxTag(rank_, tag), &params);
  if (request == nullptr) {
    Complete(op, UCS_OK, data.size);
  } else if (UCS_PTR_IS_ERR(request)) {
    Complete(op, UCS_PTR_STATUS(request), 0);
  } else {
    op.request = request;
  }
  return FailIfRefused(op);
}

absl::Status UcxTransport::FailIfRefused(const Operation& op) {
  if (!op.done || op.status == UCS_OK) return absl::OkStatus();
  absl::Status status = OperationError(op);
  Abort(status);
  return status;
}

absl::Status UcxTransport::PostRecv(int peer, std::uint64_t tag, MutableBuffer data) {
  if (absl::Status status = CheckPost(peer, tag); !status.ok()) return status;
  endpoints_[peer]->MarkUsed();
  Operation& op = operations_.emplace_back(Operation{.transport = this,
                                                     .is_send = false,
                                                     .peer = peer,
                                                     .tag = tag,
                                                     .size = data.size,
                                                     .index = operations_.size()});
  if (Staged(data.memory)) {
    op.staging = staging_pool_.Acquire(data.size, data.memory);
    op.deliver_to = data;
    data = op.staging.buffer();
  }
  ucp_request_param_t params{};
  // No immediate completion: UCX 1.13 does not fill recv_info.tag_info when
  // a receive completes inside this call, and the length is needed to catch
  // a short message. The callback (possibly run before this returns) gets it.
  params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  params.cb.recv = &UcxTransport::RecvCallback;
  params.user_data = &op;
  params.memory_type = UcxMemoryType(data.memory);
  ucs_status_ptr_t request = ucp_tag_recv_nbx(worker_->get(), data.data, data.size,
                                              UcxTag(peer, tag), kFullTagMask, &params);
  if (UCS_PTR_IS_ERR(request)) {
    Complete(op, UCS_PTR_STATUS(request), 0);
  } else {
    op.request = request;
  }
  return FailIfRefused(op);
}

// The callbacks only record; requests are released by ReleaseRequests(),
// since a receive's callback may run before ucp_tag_recv_nbx() has returned
// the request.
void UcxTransport::SendCallback(void* /*request*/, ucs_status_t status, void* user_data) {
  auto* op = static_cast<Operation*>(user_data);
  op->transport->Complete(*op, status, op->size);
}

void UcxTransport::RecvCallback(void* /*request*/, ucs_status_t status,
                                const ucp_tag_recv_info_t* info, void* user_data) {
  auto* op = static_cast<Operation*>(user_data);
  op->transport->Complete(*op, status, status == UCS_OK && info != nullptr ? info->length : 0);
}

void UcxTransport::ReleaseRequests() {
  // A request still in flight (only after Abort() gave up waiting) is
  // detached: UCX finishes it internally and calls no callback.
  for (Operation& op : operations_) {
    if (op.request != nullptr) ucp_request_free(op.request);
  }
  operations_.clear();
  completed_ = 0;
  finished_.clear();
  reported_ = 0;
  operation_failed_ = false;
}

void UcxTransport::Complete(Operation& op, ucs_status_t status, std::size_t length) {
  op.done = true;
  // A completed send's bounce buffer is free for the next staged transfer.
  if (op.is_send) op.staging.reset();
  ++completed_;
  finished_.push_back(op.index);
  // A message shorter than the buffer completes without error in UCX; the
  // interface says sizes must match, so that is a failure too.
  if (status == UCS_OK && !op.is_send && length != op.size) {
    op.received = length;
    op.short_message = true;
    status = UCS_ERR_MESSAGE_TRUNCATED;
  }
  op.status = status;
  if (status != UCS_OK) {
    operation_failed_ = true;
    return;
  }
  PeerTraffic& traffic = traffic_[op.peer];
  if (op.is_send) {
    traffic.bytes_sent += length;
    ++traffic.messages_sent;
  } else {
    traffic.bytes_received += length;
    ++traffic.messages_received;
  }
}

std::string UcxTransport::Describe(const Operation& op) {
  return op.is_send
             ? absl::StrCat("send of ", op.size, " bytes to rank ", op.peer, " (tag ", op.tag, ")")
             : absl::StrCat("receive of ", op.size, " bytes from rank ", op.peer, " (tag ", op.tag,
                            ")");
}

absl::Status UcxTransport::OperationError(const Operation& op) const {
  if (op.status == UCS_OK) return absl::OkStatus();
  const ucs_status_t peer_failure = endpoints_.empty() || endpoints_[op.peer] == nullptr
                                        ? UCS_OK
                                        : endpoints_[op.peer]->failure();
  if (IsPeerFailure(op.status) || peer_failure != UCS_OK) {
    return UcsStatusToStatus(peer_failure != UCS_OK ? peer_failure : op.status,
                             absl::StrCat("rank ", rank_, ": lost connection to rank ", op.peer,
                                          " during a ", Describe(op)));
  }
  if (op.status == UCS_ERR_MESSAGE_TRUNCATED) {
    // UCX truncates (and reports) a message larger than the buffer; a
    // shorter one is caught in Complete(), where its length is known.
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank_, ": ", Describe(op), ": size mismatch, the message rank ", op.peer, " sent ",
        op.short_message ? absl::StrCat("has only ", op.received, " bytes")
                         : std::string("is larger")));
  }
  return UcsStatusToStatus(op.status, absl::StrCat("rank ", rank_, ": ", Describe(op)));
}

bool UcxTransport::HasPendingWithLostPeer() const {
  if (lost_peers_.load(std::memory_order_acquire) == 0) return false;
  return !LostPeerError().ok();
}

absl::Status UcxTransport::LostPeerError() const {
  for (const Operation& op : operations_) {
    if (op.done) continue;
    const ucs_status_t failure = endpoints_[op.peer]->failure();
    if (failure != UCS_OK) {
      return UcsStatusToStatus(
          failure, absl::StrCat("rank ", rank_, ": lost connection to rank ", op.peer, " with a ",
                                Describe(op), " pending"));
    }
  }
  return absl::OkStatus();
}

absl::Status UcxTransport::TimeoutError() const {
  constexpr int kListed = 4;  // enough to see the pattern, short enough to read
  std::string pending;
  int listed = 0;
  for (const Operation& op : operations_) {
    if (op.done) continue;
    if (listed++ == kListed) {
      absl::StrAppend(&pending, ", ...");
      break;
    }
    absl::StrAppend(&pending, listed > 1 ? ", " : "", Describe(op));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("rank ", rank_, ": wait timed out after ", options_.wait_timeout.count(),
                   " ms with ", operations_.size() - completed_, " of ", operations_.size(),
                   " operations pending: ", pending));
}

template <typename Done>
absl::Status UcxTransport::ProgressUntil(Done done) {
  if (!broken_.ok()) return BrokenError();
  const Clock::time_point deadline = Clock::now() + options_.wait_timeout;
  absl::Status progress = worker_->ProgressUntil(
      [&] { return done() || operation_failed_ || HasPendingWithLostPeer(); }, deadline,
      options_.idle_spins, options_.yield_spin, options_.slow_yield, options_.yield_pause);

  absl::Status result;
  if (operation_failed_) {
    for (const Operation& op : operations_) {
      if (op.done && op.status != UCS_OK) {
        result = OperationError(op);
        break;
      }
    }
  } else if (HasPendingWithLostPeer()) {
    result = LostPeerError();
  } else if (!progress.ok()) {
    result = absl::IsDeadlineExceeded(progress) ? TimeoutError() : progress;
  }
  if (!result.ok()) Abort(result);
  return result;
}

bool UcxTransport::Staged(MemoryType memory) const {
  if (HostAccessible(memory)) return false;
  return !(device_direct_ && memory == MemoryType::kCuda);
}

ucs_memory_type_t UcxTransport::UcxMemoryType(MemoryType memory) {
  // Staged buffers were replaced by host memory before this is asked.
  return memory == MemoryType::kCuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
}

void UcxTransport::Deliver(Operation& op) {
  if (op.deliver_to.data == nullptr) return;
  MemoryOpsFor(op.deliver_to.memory).Upload(op.deliver_to, op.staging.host());
  staged_bytes_ += op.size;
  op.deliver_to = MutableBuffer{};
  op.staging.reset();
}

absl::Status UcxTransport::WaitAll() {
  if (absl::Status st = ProgressUntil([this] { return completed_ == operations_.size(); });
      !st.ok()) {
    return st;
  }
  for (Operation& op : operations_) Deliver(op);
  ReleaseRequests();
  return absl::OkStatus();
}

absl::StatusOr<std::size_t> UcxTransport::WaitAny() {
  if (!broken_.ok()) return BrokenError();
  if (reported_ == operations_.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank_, ": WaitAny with nothing pending"));
  }
  if (absl::Status st = ProgressUntil([this] { return !finished_.empty(); }); !st.ok()) return st;
  const std::size_t index = finished_.front();
  finished_.pop_front();
  ++reported_;
  Deliver(operations_[index]);
  return index;
}

void UcxTransport::ResetTraffic() {
  std::fill(traffic_.begin(), traffic_.end(), PeerTraffic{});
  staged_bytes_ = 0;
}

void UcxTransport::Abort(absl::Status cause) {
  broken_ = std::move(cause);
  // Unmatched receives can be cancelled; sends (and receives already being
  // filled) end when their endpoint is force-closed. Until all of them have
  // completed, UCX may still touch the callers' buffers.
  for (Operation& op : operations_) {
    if (!op.done && !op.is_send && op.request != nullptr) {
      ucp_request_cancel(worker_->get(), op.request);
    }
  }
  const Clock::time_point deadline = Clock::now() + options_.close_timeout;
  for (std::unique_ptr<Endpoint>& endpoint : endpoints_) {
    if (endpoint != nullptr && endpoint->get() != nullptr) {
      worker_->Wait(endpoint->StartClose(), deadline, options_.idle_spins);
    }
  }
  worker_
      ->ProgressUntil([this] { return completed_ == operations_.size(); }, deadline,
                      options_.idle_spins, std::chrono::microseconds(0))
      .IgnoreError();
  ReleaseRequests();
}

}  // namespace testbed
