// In-process transport: the ranks are threads of one process that share an
// InProcessFabric. A send is a rendezvous: the sender publishes its span, the
// receiver copies straight out of it (one copy, as a zero-copy network would
// do it) and then marks the send complete. Used by the unit tests of every
// collective, so schedules are tested without sockets.
//
// A rank can be declared lost (MarkLost) to test that waiting peers fail with
// an error naming it instead of hanging; every wait also has a deadline.
//
// Thread-safety: the fabric is thread-safe; each InProcessTransport is used by
// one thread. The fabric must outlive the transports it hands out.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <tuple>
#include <vector>

#include "allreduce/transport/transport.h"

namespace testbed {

class InProcessFabric {
 public:
  explicit InProcessFabric(int world_size,
                           std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // The transport of `rank`; call once per rank.
  std::unique_ptr<Transport> Connect(int rank);

  // From now on, every wait on `rank` fails with an error naming it. Its
  // sends not yet received are dropped, as a dead process's would be, and
  // this returns once no peer is still copying out of one: the caller may
  // then free the lost rank's buffers.
  void MarkLost(int rank);

  int world_size() const { return world_size_; }

 private:
  friend class InProcessTransport;

  struct PendingSend {
    ConstBuffer data;
    bool consumed = false;
  };
  using Key = std::tuple<int, int, std::uint64_t>;  // (from, to, tag)

  const int world_size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable changed_;  // a send was published or consumed, or a rank was lost
  std::map<Key, std::shared_ptr<PendingSend>> published_;  // guarded by mu_
  std::vector<bool> lost_;                                 // guarded by mu_
  std::vector<int> copying_from_;  // copies under way out of each rank's sends; guarded by mu_
};

}  // namespace testbed
