// The worker daemon's life: attach to the coordinator (retrying until it is
// up), then serve experiments one after another - make a UCX transport for the
// rank it is given, trade addresses through the coordinator, run the sweep,
// send results - until told to stop. This class holds the stream to the
// coordinator; what each of the coordinator's messages does is in
// ControlHandlers (control_handlers.h).
//
// A worker whose experiment fails (a peer lost, an Abort from the coordinator)
// logs why and exits non-zero: UCX operations cannot be interrupted from
// another thread, and a crashed peer leaves nothing worth reusing. Container
// restart policies bring it back.
//
// Thread-safety: Run() runs on the main thread and starts a heartbeat
// thread and one sweep thread per experiment; Stop() may be called from any
// thread (the signal thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "proto/credentials.h"
#include "proto/tls.h"

namespace testbed {

struct WorkerOptions {
  std::string coordinator;  // host:port
  Credentials credentials;
  Tls tls;  // for the coordinator and the parameter-server shards; off: plaintext
  std::chrono::seconds connect_timeout{120};  // for the coordinator to come up
  std::string peer_error_handling = "auto";   // auto, on, off (UCX endpoints)
  std::string net_device;  // for wire bytes; empty: the one UCX_NET_DEVICES names
  // The number to ask the coordinator for (the harness's index of this
  // worker); none: the coordinator's choice.
  std::optional<std::uint32_t> worker_id;
  // The UCX settings this worker runs with, recorded on every all-reduce
  // result (allreduce/transport/ucx_settings.h's DescribeUcxEnvironment).
  std::string ucx_environment;
};

// Run()'s code when the coordinator went away (its stream broke) with no
// experiment failing: the caller may attach again once it is back.
inline constexpr int kLostCoordinator = 3;

class WorkerDaemon {
 public:
  explicit WorkerDaemon(WorkerOptions options);
  ~WorkerDaemon();

  // Blocks until stopped (returns 0), until the coordinator goes away
  // (kLostCoordinator) or an experiment fails (logs why and returns 1).
  int Run();
  // Asks Run() to return: cancels the coordinator stream.
  void Stop();

 private:
  struct State;
  const WorkerOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace testbed
