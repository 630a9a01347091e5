// The RAII owners of the UCP objects behind the UCX transport (declared in
// allreduce/transport/ucx_internal.h): the context, read from UCX's
// environment; the worker, its address and the wait for one request; an
// endpoint to a peer, which records the peer's failure, flushed and closed.
#include <memory>
#include <span>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/transport/ucx_internal.h"
#include "allreduce/transport/ucx_status.h"

namespace testbed {

absl::StatusOr<std::unique_ptr<UcxTransport::Impl::Context>> UcxTransport::Impl::Context::Create(
    int world_size) {
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

absl::StatusOr<std::uint64_t> UcxTransport::Impl::Context::MemoryTypes() const {
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  ucs_status_t status = ucp_context_query(context_, &attr);
  if (status != UCS_OK) return UcsStatusToStatus(status, "ucp_context_query");
  return static_cast<std::uint64_t>(attr.memory_types);
}

absl::StatusOr<std::unique_ptr<UcxTransport::Impl::Worker>> UcxTransport::Impl::Worker::Create(
    const Context& context) {
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

absl::StatusOr<std::vector<std::byte>> UcxTransport::Impl::Worker::Address() const {
  ucp_address_t* address = nullptr;
  std::size_t length = 0;
  ucs_status_t status = ucp_worker_get_address(worker_, &address, &length);
  if (status != UCS_OK) return UcsStatusToStatus(status, "ucp_worker_get_address");
  const auto* bytes = reinterpret_cast<const std::byte*>(address);
  std::vector<std::byte> copy(bytes, bytes + length);
  ucp_worker_release_address(worker_, address);
  return copy;
}

ucs_status_t UcxTransport::Impl::Worker::Wait(ucs_status_ptr_t request,
                                              Clock::time_point deadline, int idle_spins,
                                              std::chrono::microseconds yield_spin) {
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

absl::StatusOr<std::unique_ptr<UcxTransport::Impl::Endpoint>> UcxTransport::Impl::Endpoint::Create(
    Worker& worker, int peer, std::span<const std::byte> address, bool peer_error_handling,
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

UcxTransport::Impl::Endpoint::~Endpoint() {
  if (ep_ == nullptr) return;
  worker_.Wait(StartClose(), Clock::now() + std::chrono::seconds(1), 1);
}

ucs_status_ptr_t UcxTransport::Impl::Endpoint::StartFlush() {
  ucp_request_param_t params{};
  return ucp_ep_flush_nbx(ep_, &params);
}

ucs_status_ptr_t UcxTransport::Impl::Endpoint::StartClose() {
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  params.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t request = ucp_ep_close_nbx(ep_, &params);
  ep_ = nullptr;
  return request;
}

void UcxTransport::Impl::Endpoint::OnError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  auto* self = static_cast<Endpoint*>(arg);
  ucs_status_t expected = UCS_OK;
  if (self->failure_.compare_exchange_strong(expected, status, std::memory_order_acq_rel)) {
    self->lost_peers_->fetch_add(1, std::memory_order_release);
  }
}

}  // namespace testbed
