// The worker's side of the control protocol: one small handler per message
// the coordinator sends, over the state of the experiment in hand.
//
//   Welcome  attaching -> idle
//   Prepare  idle (or a finished experiment) -> prepared: make a UCX transport, send Address
//   Connect  prepared -> connected: connect to every rank, send Ready
//   Start    connected -> started: run the sweep on its own thread, send results, Finished;
//            for a training run (Prepare.training), train this rank on that
//            thread instead (rank 0 sends the TrainingRows), then Finished.
//            After Finished the thread keeps UCX progressed for the peers
//            still finishing, until the next message releases it.
//   Abort    any: log the coordinator's reason and leave
//
// A message out of that order (a Connect before any Prepare, a second Start,
// ids that do not match) is refused: the worker reports a Failure naming the
// message and its own state, and leaves, as for any failed experiment.
//
// The handlers know nothing of gRPC: they talk back through a ControlLink,
// which the daemon implements over its stream and tests implement by hand.
//
// Thread-safety: Handle() and the accessors are called from one thread (the
// daemon's reader). The sweep thread sends through the link and may mark the
// worker failed; the link's Send must therefore be thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "allreduce/transport/ucx_transport.h"
#include "proto/control.pb.h"
#include "worker/ps_client.h"
#include "worker/worker_daemon.h"

namespace testbed {

// What the handlers need of the coordinator's stream.
class ControlLink {
 public:
  virtual ~ControlLink() = default;
  // Sends one message to the coordinator; false once the stream is gone.
  // Called from the reader and the sweep thread.
  virtual bool Send(const proto::WorkerMessage& message) = 0;
  // Called on the sweep thread after its failure was reported: waits, bounded,
  // for the coordinator's verdict (an Abort), then wakes the reader.
  virtual void AwaitVerdict() = 0;
};

// One experiment on this worker, from its Prepare until the next Prepare (or
// the daemon's end). The sweep thread borrows spec, parameter_server and
// transport: they are destroyed only after it has been joined.
struct Experiment {
  enum class Stage { kPrepared, kConnected, kStarted };

  ~Experiment() { JoinSweep(); }
  // Releases a thread that serves its peers after its end, and joins it.
  void JoinSweep() {
    released = true;
    if (sweep.joinable()) sweep.join();
  }

  std::uint64_t id = 0;
  Stage stage = Stage::kPrepared;
  proto::ExperimentSpec spec;
  std::optional<proto::TrainingSpec> training;  // a training run, instead of `spec`
  std::unique_ptr<PsClient> parameter_server;  // when the coordinator gave shards
  std::unique_ptr<UcxTransport> transport;     // null if Prepare could not make one
  std::string transport_label;                 // what UCX chose; set by Connect
  std::thread sweep;                           // set by Start
  std::atomic<bool> sweeping{false};           // the sweep or training has not ended
  std::atomic<bool> released{false};           // the verdict came: stop serving peers
};

class ControlHandlers {
 public:
  // What the reader does after a message.
  enum class After {
    kReadOn,   // read the next message
    kLeave,    // the worker failed or was aborted: stop reading
    kExitNow,  // aborted while a sweep may be blocked inside UCX: end the process
    kAwaitVerdict,  // failed and said so: read on, bounded, until the coordinator's Abort
  };

  // `options` and `link` must outlive this object.
  ControlHandlers(const WorkerOptions& options, ControlLink& link);
  // Joins a sweep still running (the daemon exits instead when one is stuck).
  ~ControlHandlers();

  // Dispatches to the handler for the message's kind.
  After Handle(const proto::CoordinatorMessage& message);

  After OnWelcome(const proto::Welcome& welcome);
  After OnPrepare(const proto::Prepare& prepare);
  After OnConnect(const proto::Connect& connect);
  After OnStart(const proto::Start& start);
  After OnAbort(const proto::Abort& abort);

  // Returns once the sweep thread, if any, has ended.
  void WaitForSweep() {
    if (experiment_) experiment_->JoinSweep();
  }

  // The experiment failed here, or was refused or aborted (any thread sets it).
  bool failed() const { return failed_; }
  // A sweep thread runs: it may be inside UCX, where it cannot be stopped.
  bool sweeping() const { return experiment_ && experiment_->sweeping; }
  // From the Welcome; zero before it.
  std::chrono::milliseconds heartbeat_interval() const { return heartbeat_interval_; }

 private:
  // Whether the experiment in hand is `id`, at `stage`.
  bool At(std::uint64_t id, Experiment::Stage stage) const;
  // Refuses message `what` for experiment `id`, naming this worker's state.
  After Refuse(const char* what, std::uint64_t id);
  std::string StateText() const;
  // Logs `why`, reports it to the coordinator as experiment `id`'s failure.
  void Fail(std::uint64_t id, const std::string& why);
  // Makes experiment_'s parameter-server client and transport.
  absl::Status MakeTransport(const proto::Prepare& prepare);
  // The body of the sweep thread of `e`.
  void Sweep(Experiment& e);
  // The body of the thread of a training run `e`: trains this rank.
  absl::Status Train(Experiment& e);
  // How the experiment thread of `e` ends: Finished, then serving the peers
  // until the verdict; or its failure reported.
  void Conclude(Experiment& e, const absl::Status& status);

  const WorkerOptions& options_;
  ControlLink& link_;
  bool attached_ = false;  // a Welcome came
  std::chrono::milliseconds heartbeat_interval_{0};
  std::atomic<bool> failed_{false};
  std::unique_ptr<Experiment> experiment_;  // the last one prepared
};

}  // namespace testbed
