// Memory handed to gRPC as slices without copying it: lent (the caller owns
// it and waits for gRPC to let go) or shared (gRPC holds a reference).
//
// A slice made by grpc::Slice(const void*, size_t) is a copy: a push of 64 MiB
// from each of 4 workers cost 256 MiB of memcpy per step, about a tenth of the
// parameter server's CPU time. A lent slice points into the caller's memory
// instead, and gRPC calls back when it drops its last reference. gRPC may hold
// a message's slices after the call that sent it has ended (in the transport's
// write queue, until the socket takes them), so the lent memory must stay
// valid until WaitAllReturned() returns true. gRPC only reads send slices.
//
// Thread-safety: Lend and WaitAllReturned may be called from any threads; the
// release callbacks run on gRPC's. The shared state outlives this object while
// any slice is still lent.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>

#include <grpcpp/support/slice.h>

namespace testbed {

// A slice over `data` that holds a copy of `owner` until gRPC drops it; the
// owner keeps `data` valid and unchanged meanwhile.
grpc::Slice SharedSlice(std::span<const std::byte> data, std::shared_ptr<const void> owner);

class LentSlices {
 public:
  LentSlices();
  ~LentSlices();
  LentSlices(const LentSlices&) = delete;
  LentSlices& operator=(const LentSlices&) = delete;

  // A slice over [data, data + size): no copy.
  grpc::Slice Lend(const std::byte* data, std::size_t size);

  // How many lent slices gRPC still holds.
  std::size_t outstanding() const;

  // Blocks until gRPC has released every lent slice (true) or `deadline` passes.
  bool WaitAllReturned(std::chrono::steady_clock::time_point deadline);

 private:
  struct State;
  static void Return(void* state);
  State* state_;  // deleted by whichever of ~LentSlices and the last Return comes last
};

}  // namespace testbed
