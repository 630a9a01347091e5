// Transport: the seam between the collectives and the wire. A rank posts sends
// and receives of byte spans to and from peers, each with a tag, then waits for
// all of them, or for them one at a time (WaitAny: what a pipelined executor
// needs to start the next segment as soon as one arrives). Messages between
// the same pair of ranks match by tag, not by order, and a receive must be
// posted with exactly the size that is sent.
//
// Implementations, one file each beside this one: in-process
// (inprocess_transport.h: threads in one process, for tests) and UCX
// (ucx_transport.h: real processes). Both count payload bytes per peer, so
// traffic is measured where it happens.
//
// Thread-safety: one Transport belongs to one rank and is used from one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "allreduce/memory.h"

namespace testbed {

// Tags are limited to 48 bits so a transport may pack the source rank beside
// them (UCX tag matching has one 64-bit tag and no source filter).
inline constexpr int kTagBits = 48;
inline constexpr std::uint64_t kMaxTag = (std::uint64_t{1} << kTagBits) - 1;

struct PeerTraffic {
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_received = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string_view name() const = 0;  // "inprocess", "ucx"

  // Starts sending `data` to `peer`. `data` must stay valid and unchanged
  // until WaitAny() reports the send or WaitAll() returns. The buffer says
  // where it lives (host memory from a plain byte span); a backend that
  // cannot reach that memory stages it through host memory with the memory's
  // own operations.
  virtual absl::Status PostSend(int peer, std::uint64_t tag, ConstBuffer data) = 0;
  // Starts receiving exactly data.size bytes from `peer` into `data`.
  virtual absl::Status PostRecv(int peer, std::uint64_t tag, MutableBuffer data) = 0;
  // Blocks until every posted operation has completed. Fails, naming the peer,
  // when a peer is lost, a size does not match, or the wait times out; after a
  // failure the transport is unusable.
  virtual absl::Status WaitAll() = 0;
  // Blocks until one posted operation that has not been reported yet has
  // completed, and returns which: its index among the operations posted since
  // the last WaitAll() (the first PostSend or PostRecv after it is 0). A
  // reported receive's data is in place; a reported send's buffer is free.
  // Each operation is reported once; with none left to report this is
  // FailedPrecondition. Fails like WaitAll() otherwise. Only WaitAll() ends a
  // batch and restarts the numbering, so a caller that used WaitAny() calls
  // WaitAll() once at the end (it returns at once when all were reported).
  virtual absl::StatusOr<std::size_t> WaitAny() = 0;

  // Payload bytes per peer (indexed by rank) since construction or the last reset.
  virtual std::vector<PeerTraffic> Traffic() const = 0;
  virtual void ResetTraffic() = 0;
  // Bytes copied through host memory since construction or the last reset
  // (down for sends, up for receives), for memory this backend cannot hand
  // to its network as it is; 0 for a backend that never stages.
  virtual std::uint64_t StagedBytes() const { return 0; }
};

}  // namespace testbed
