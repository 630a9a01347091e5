// The UCX transport's data path (UcxTransport::Impl, declared in
// allreduce/transport/ucx_internal.h): posting tagged sends and receives,
// staging what UCX cannot reach through host memory, recording completions
// from UCX's callbacks, progressing the worker in WaitAll() and WaitAny(),
// turning what failed into an error naming the peer, and the abort that
// follows a failure.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "allreduce/transport/ucx_internal.h"
#include "allreduce/transport/ucx_status.h"

namespace testbed {

absl::Status UcxTransport::Impl::CheckPost(int peer, std::uint64_t tag) const {
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

absl::Status UcxTransport::Impl::PostSend(int peer, std::uint64_t tag, ConstBuffer data) {
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
  params.cb.send = &Impl::SendCallback;
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

absl::Status UcxTransport::Impl::FailIfRefused(const Operation& op) {
  if (!op.done || op.status == UCS_OK) return absl::OkStatus();
  absl::Status status = OperationError(op);
  Abort(status);
  return status;
}

absl::Status UcxTransport::Impl::PostRecv(int peer, std::uint64_t tag, MutableBuffer data) {
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
  params.cb.recv = &Impl::RecvCallback;
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
void UcxTransport::Impl::SendCallback(void* /*request*/, ucs_status_t status, void* user_data) {
  auto* op = static_cast<Operation*>(user_data);
  op->transport->Complete(*op, status, op->size);
}

void UcxTransport::Impl::RecvCallback(void* /*request*/, ucs_status_t status,
                                      const ucp_tag_recv_info_t* info, void* user_data) {
  auto* op = static_cast<Operation*>(user_data);
  op->transport->Complete(*op, status, status == UCS_OK && info != nullptr ? info->length : 0);
}

void UcxTransport::Impl::ReleaseRequests() {
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

void UcxTransport::Impl::Complete(Operation& op, ucs_status_t status, std::size_t length) {
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

std::string UcxTransport::Impl::Describe(const Operation& op) {
  return op.is_send
             ? absl::StrCat("send of ", op.size, " bytes to rank ", op.peer, " (tag ", op.tag, ")")
             : absl::StrCat("receive of ", op.size, " bytes from rank ", op.peer, " (tag ", op.tag,
                            ")");
}

absl::Status UcxTransport::Impl::OperationError(const Operation& op) const {
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

bool UcxTransport::Impl::HasPendingWithLostPeer() const {
  if (lost_peers_.load(std::memory_order_acquire) == 0) return false;
  return !LostPeerError().ok();
}

absl::Status UcxTransport::Impl::LostPeerError() const {
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

absl::Status UcxTransport::Impl::TimeoutError() const {
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
absl::Status UcxTransport::Impl::ProgressUntil(Done done) {
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

bool UcxTransport::Impl::Staged(MemoryType memory) const {
  if (HostAccessible(memory)) return false;
  return !(device_direct_ && memory == MemoryType::kCuda);
}

ucs_memory_type_t UcxTransport::Impl::UcxMemoryType(MemoryType memory) {
  // Staged buffers were replaced by host memory before this is asked.
  return memory == MemoryType::kCuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
}

void UcxTransport::Impl::Deliver(Operation& op) {
  if (op.deliver_to.data == nullptr) return;
  MemoryOpsFor(op.deliver_to.memory).Upload(op.deliver_to, op.staging.host());
  staged_bytes_ += op.size;
  op.deliver_to = MutableBuffer{};
  op.staging.reset();
}

absl::Status UcxTransport::Impl::WaitAll() {
  if (absl::Status st = ProgressUntil([this] { return completed_ == operations_.size(); });
      !st.ok()) {
    return st;
  }
  for (Operation& op : operations_) Deliver(op);
  ReleaseRequests();
  return absl::OkStatus();
}

absl::StatusOr<std::size_t> UcxTransport::Impl::WaitAny() {
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

void UcxTransport::Impl::ResetTraffic() {
  std::fill(traffic_.begin(), traffic_.end(), PeerTraffic{});
  staged_bytes_ = 0;
}

void UcxTransport::Impl::Abort(absl::Status cause) {
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
