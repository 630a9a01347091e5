// UCX transport: one rank's Transport over UCP's tag-matching API, for ranks
// that are real processes (or, in tests, threads with one transport each).
//
// Each transport owns a UCP context, one worker and an endpoint to every other
// rank, created in that order and torn down in reverse. Bootstrap needs no
// control plane: Create() makes the worker, WorkerAddress() is the blob that
// peers need to reach it, and Connect() takes every rank's blob (delivered by
// whatever out-of-band channel the caller has: the gRPC coordinator, a pipe,
// memory) and creates the endpoints.
//
// UCP tag receives do not filter by endpoint, so the 64-bit UCX tag carries
// the sender's rank in its top 16 bits and the interface's 48-bit tag below
// it; receives match all 64 bits. Which transports carry the data (tcp,
// shared memory, cma) is UCX's choice, steered with its own UCX_TLS
// environment variable, read when the transport is created.
//
// Failure: endpoints use UCP_ERR_HANDLING_MODE_PEER, so a peer whose process
// dies turns the operations pending with it into an error naming its rank
// ("lost connection to rank 3") instead of a hang, provided the transport in
// use can notice. TCP notices at once; UCX 1.13's shared memory (posix, sysv)
// cannot, so under peer error handling UCX never selects it and ranks on one
// host talk over loopback TCP. Every WaitAll() and WaitAny() has a deadline
// (DeadlineExceeded, listing what it waited for), the backstop for what UCX
// cannot see. An error from WaitAll(), or a UCX error from a Post call, first
// ends everything in flight (so the caller's buffers are free again) and
// leaves the transport unusable: later calls fail with FailedPrecondition. A
// bad argument (peer, tag, call before Connect()) is refused and changes
// nothing.
//
// Waiting does not burn a core: WaitAll() polls the worker, yielding the core
// between idle polls for a bounded time (skipped for a while after a yield
// lost the core to another process for a whole time slice), then arms the
// worker and sleeps on its event fd. See UcxOptions for the numbers.
//
// Teardown flushes, on every endpoint that carried anything, what is still
// owed to the peer (sent data, rendezvous replies); that needs the peer to
// progress its worker, so ranks are best destroyed concurrently, as separate
// processes are. The wait is bounded by UcxOptions::close_timeout.
//
// Device memory: a buffer host code cannot touch (cuda, fake-device) is
// staged through host memory around each transfer - a send's bytes copied
// down when it is posted, a receive's copied up when WaitAny() or WaitAll()
// reports it - in bounce buffers leased from the transport's StagingPool
// (pinned for cuda) and given back as soon as the transfer is over, so
// repeated runs allocate none beyond what one has in flight. Pipelining is the caller's:
// the segmented executor posts segment k+1's send (its copy down) while
// segment k is on the wire, and reduces each received segment as WaitAny()
// reports it, copied up. Unless the transport was
// created for the direct path (UcxOptions::gpu_path), where UCX reports CUDA
// memory (ucp_context_query): cuda buffers then go to UCX as they are, with
// their memory type on the request. Create() refuses gpu_path kDirect on a UCX
// without CUDA memory: Debian's UCX 1.13 crashes when handed a device pointer.
//
// Thread-safety: like every Transport, one UcxTransport is used by one thread
// at a time (the worker runs in UCS_THREAD_MODE_SERIALIZED, so that thread may
// differ from the one that created it).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "allreduce/transport/staging_pool.h"
#include "allreduce/transport/transport.h"
#include "allreduce/transport/ucx_settings.h"

namespace testbed {

struct UcxOptions {
  // How long one WaitAll() may block before it fails with DeadlineExceeded.
  std::chrono::milliseconds wait_timeout = std::chrono::seconds(60);
  // ucp_worker_progress() calls in a row that find nothing to do before
  // WaitAll() starts yielding (or sleeping). Kept at one: with more ranks
  // than cores the peer being waited for is often queued behind us on the
  // same core, and over TCP each progress call is an epoll_wait() system
  // call, so 64 of them held the core for tens of microseconds per round
  // (butterfly at 8 B, N = 4 on 2 cores, UCX tcp: minimum 75 us, 35 us
  // with one).
  int idle_spins = 1;
  // After those, keep polling - yielding the core to whoever else is runnable
  // between polls - for up to this long before sleeping. Sleeping and being
  // woken costs tens of microseconds, more than a small collective's round;
  // yielding keeps a machine with more ranks than cores usable.
  std::chrono::microseconds yield_spin = std::chrono::microseconds(200);
  // A sched_yield() that takes longer than `slow_yield` handed the core to a
  // process that is not a peer rank (a compiler, another job) and got it
  // back only when that process's time slice ended. A sleeping rank, woken
  // by its message, preempts such a process; a yielding one cannot. So after
  // a slow yield WaitAll() skips the yielding stage (polls, then sleeps) for
  // `yield_pause`, then tries yielding again. The threshold sits above what
  // a peer rank's own step takes (over TCP in a VM, 20-200 us; a stray one
  // up to a few hundred) and below a time slice (about 1-4 ms here); at
  // 50 us, TCP waits paused on peers' steps and slept most of the time.
  // Measured beside a parallel build, butterfly 8 B - 4 KiB, N = 4 on 2
  // cores, mean over sizes of the median of 5 runs (us, tcp / shm): never
  // pausing 74 / 24, pausing at 50 us 87 / 55, at 1 ms 67 / 19.
  std::chrono::microseconds slow_yield = std::chrono::milliseconds(1);
  std::chrono::milliseconds yield_pause = std::chrono::milliseconds(10);
  // Ask UCX to detect dead peers (UCP_ERR_HANDLING_MODE_PEER). UCX then uses
  // only transports that can; turn it off to allow shared-memory transports
  // without failure detection (the control plane must then notice dead peers).
  bool peer_error_handling = true;
  // How long the destructor waits for endpoints to flush and close, and a
  // failed WaitAll() for UCX to give up the operations still in flight.
  std::chrono::milliseconds close_timeout = std::chrono::seconds(10);
  // How cuda buffers meet UCX: kAuto and kDirect hand them to UCX as they are
  // where it reports CUDA memory (kDirect is refused where it does not),
  // kStaged copies them through host memory. fake-device memory is staged
  // whatever this says.
  GpuPathRequest gpu_path = GpuPathRequest::kAuto;
};

class UcxTransport final : public Transport {
 public:
  // Creates the context and worker of `rank`. The transport cannot move data
  // until Connect() has been called.
  static absl::StatusOr<std::unique_ptr<UcxTransport>> Create(int rank, int world_size,
                                                              UcxOptions options = {});
  // Flushes the endpoints that were used (bounded by close_timeout), closes
  // all of them, then the worker and the context.
  ~UcxTransport() override;

  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  // The address peers pass to Connect() to reach this rank; opaque bytes.
  std::vector<std::byte> WorkerAddress() const;

  // Creates an endpoint to every other rank. `addresses_by_rank` holds one
  // WorkerAddress() per rank, indexed by rank (this rank's own entry is not
  // used). Call once. Non-blocking: connections complete while waiting.
  // Unavailable if UCX has no transport to a peer (e.g. UCX_TLS allows only
  // shared memory while peer error handling is on).
  absl::Status Connect(const std::vector<std::vector<std::byte>>& addresses_by_rank);

  // What UCX chose for the endpoint to `peer`, as printed by
  // ucp_ep_print_info (transports and devices per lane). For reports and
  // debugging; empty if there is no such endpoint.
  std::string DescribeEndpoint(int peer) const;

  // The memory types UCX can move (ucp_context_query's memory_types: bit i
  // is ucs_memory_type_t i); 0x1, host only, for a UCX without CUDA.
  std::uint64_t memory_types() const;
  // Whether cuda buffers go to UCX as they are (else they are staged).
  bool device_direct() const;

  int rank() const override;
  int world_size() const override;
  std::string_view name() const override { return "ucx"; }

  // Transport's contract; peer != rank(), tag <= kMaxTag, after Connect().
  absl::Status PostSend(int peer, std::uint64_t tag, ConstBuffer data) override;
  absl::Status PostRecv(int peer, std::uint64_t tag, MutableBuffer data) override;
  absl::Status WaitAll() override;
  absl::StatusOr<std::size_t> WaitAny() override;
  // Keeps this rank's worker progressed - asleep on its event fd when there
  // is nothing to do - until `released` holds (checked at least every
  // 100 ms). A rank that is done calls it while it waits for the
  // coordinator's verdict: UCX over TCP completes an eager send once its last
  // fragment is copied into the endpoint's buffer, and that fragment leaves
  // only while the worker is progressed, so a peer still in its last receive
  // needs this rank served. Flushing instead would not do: a flush waits for
  // the peers' progress too, and the peers that are done wait for nothing.
  // After Connect(), with no operation pending.
  void ServePeersUntil(const std::atomic<bool>& released);

  std::vector<PeerTraffic> Traffic() const override;
  void ResetTraffic() override;

  // Bytes copied through host memory (down for sends, up for receives)
  // since construction or the last ResetTraffic(): every staged payload
  // byte once, so on the staged path it equals the payload sent plus
  // received.
  std::uint64_t StagedBytes() const override;
  // The bounce buffers' pool: how many it allocated, how many are out.
  StagingPool::Stats staging_stats() const;

 private:
  // The transport itself: the UCX objects and the operations in flight,
  // defined in allreduce/transport/ucx_internal.h so that including this
  // header does not include UCX's.
  class Impl;

  explicit UcxTransport(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace testbed
