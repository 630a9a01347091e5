// The UCX transport's setup and teardown: UcxTransport's public methods,
// which forward to UcxTransport::Impl (allreduce/transport/ucx_internal.h),
// and Impl's lifecycle: the context and worker made at Create(), the
// endpoints at Connect(), the worker served for peers, the endpoints flushed
// and closed at the end. Its data path is allreduce/transport/ucx_operations.cc.
#include "allreduce/transport/ucx_transport.h"

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "allreduce/transport/ucx_internal.h"

namespace testbed {

absl::StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::Create(int rank, int world_size,
                                                                   UcxOptions options) {
  absl::StatusOr<std::unique_ptr<Impl>> impl = Impl::Create(rank, world_size, options);
  if (!impl.ok()) return impl.status();
  return std::unique_ptr<UcxTransport>(new UcxTransport(*std::move(impl)));
}

UcxTransport::UcxTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UcxTransport::~UcxTransport() = default;

std::vector<std::byte> UcxTransport::WorkerAddress() const { return impl_->WorkerAddress(); }
absl::Status UcxTransport::Connect(const std::vector<std::vector<std::byte>>& addresses_by_rank) {
  return impl_->Connect(addresses_by_rank);
}
std::string UcxTransport::DescribeEndpoint(int peer) const {
  return impl_->DescribeEndpoint(peer);
}
std::uint64_t UcxTransport::memory_types() const { return impl_->memory_types(); }
bool UcxTransport::device_direct() const { return impl_->device_direct(); }
int UcxTransport::rank() const { return impl_->rank(); }
int UcxTransport::world_size() const { return impl_->world_size(); }
absl::Status UcxTransport::PostSend(int peer, std::uint64_t tag, ConstBuffer data) {
  return impl_->PostSend(peer, tag, data);
}
absl::Status UcxTransport::PostRecv(int peer, std::uint64_t tag, MutableBuffer data) {
  return impl_->PostRecv(peer, tag, data);
}
absl::Status UcxTransport::WaitAll() { return impl_->WaitAll(); }
absl::StatusOr<std::size_t> UcxTransport::WaitAny() { return impl_->WaitAny(); }
void UcxTransport::ServePeersUntil(const std::atomic<bool>& released) {
  impl_->ServePeersUntil(released);
}
std::vector<PeerTraffic> UcxTransport::Traffic() const { return impl_->Traffic(); }
void UcxTransport::ResetTraffic() { impl_->ResetTraffic(); }
std::uint64_t UcxTransport::StagedBytes() const { return impl_->StagedBytes(); }
StagingPool::Stats UcxTransport::staging_stats() const { return impl_->staging_stats(); }

// ---------------------------------------------------------------------------

UcxTransport::Impl::Impl(int rank, int world_size, UcxOptions options)
    : rank_(rank), world_size_(world_size), options_(options), traffic_(world_size) {}

absl::StatusOr<std::unique_ptr<UcxTransport::Impl>> UcxTransport::Impl::Create(
    int rank, int world_size, UcxOptions options) {
  if (world_size < 1 || world_size > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size ", world_size, " is outside [1, ", kMaxWorldSize, "]"));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is outside a world of ", world_size));
  }
  auto transport = std::unique_ptr<Impl>(new Impl(rank, world_size, options));
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

UcxTransport::Impl::~Impl() {
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

void UcxTransport::Impl::FlushUsedEndpoints(Clock::time_point deadline) {
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

void UcxTransport::Impl::ServePeersUntil(const std::atomic<bool>& released) {
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

absl::Status UcxTransport::Impl::Connect(
    const std::vector<std::vector<std::byte>>& addresses_by_rank) {
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

std::string UcxTransport::Impl::DescribeEndpoint(int peer) const {
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

absl::Status UcxTransport::Impl::BrokenError() const {
  return absl::FailedPreconditionError(
      absl::StrCat("the UCX transport of rank ", rank_,
                   " is unusable after an earlier failure: ", broken_.message()));
}

}  // namespace testbed
