#include "worker/worker_daemon.h"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "proto/control.grpc.pb.h"
#include "proto/grpc_status.h"
#include "worker/control_handlers.h"

namespace testbed {
namespace {

using Stream = grpc::ClientReaderWriter<proto::WorkerMessage, proto::CoordinatorMessage>;
using After = ControlHandlers::After;

// How long a worker whose sweep failed waits for the coordinator's Abort
// before leaving: well above the coordinator's hold-back on peer reports
// (CoordinatorTimeouts::report_hold_back).
constexpr auto kVerdictGrace = std::chrono::seconds(5);

proto::WorkerMessage Hello(const WorkerOptions& options) {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  proto::WorkerMessage hello;
  hello.mutable_hello()->set_host(name);
  hello.mutable_hello()->set_pid(getpid());
  hello.mutable_hello()->set_version(TESTBED_VERSION);
  if (options.worker_id) hello.mutable_hello()->set_worker_id(*options.worker_id);
  return hello;
}

// Ends the process at once: used when a sweep thread may be blocked inside
// UCX, where neither joining nor destroying it is safe.
[[noreturn]] void ExitNow(int code) {
  spdlog::default_logger()->flush();
  std::_Exit(code);
}

}  // namespace

// The coordinator's stream and the heartbeat thread; the handlers' link to it.
struct WorkerDaemon::State final : ControlLink {
  explicit State(const WorkerOptions& o) : options(o) {}

  // Until the coordinator accepts connections: nullopt, or Run's exit code.
  std::optional<int> AwaitCoordinator(grpc::Channel& channel);
  // Opens the stream, says Hello and gives the Welcome to `handlers`; false
  // (logged) when the coordinator refuses this worker.
  bool Attach(const std::shared_ptr<grpc::Channel>& channel, ControlHandlers& handlers);
  void StartHeartbeat(std::chrono::milliseconds every);
  void StopHeartbeat();
  // After a failure the reader reported itself: reads on until the
  // coordinator's verdict (an Abort) or the stream's end, cancelling the
  // stream after kVerdictGrace. Returns what the last message asked for.
  After ReadUntilVerdict(ControlHandlers& handlers);
  // Once reading has ended: Run's exit code (or the end of the process).
  int Leave(ControlHandlers& handlers);

  bool Send(const proto::WorkerMessage& message) override {
    std::lock_guard lock(write_mu);
    return stream->Write(message);
  }
  // The reader ends the process when the Abort comes; without one (no
  // coordinator) it is woken after the grace period.
  void AwaitVerdict() override {
    std::unique_lock lock(heartbeat_mu);
    heartbeat_cv.wait_for(lock, kVerdictGrace, [&] { return stopping.load(); });
    lock.unlock();
    context.TryCancel();  // wakes the reader
  }

  const WorkerOptions& options;
  grpc::ClientContext context;
  std::unique_ptr<proto::Coordinator::Stub> stub;
  std::mutex write_mu;  // one writer at a time on the stream
  std::unique_ptr<Stream> stream;
  std::atomic<bool> stop_requested{false};  // Stop() was called
  std::atomic<bool> stopping{false};        // the heartbeat thread should end
  std::mutex heartbeat_mu;
  std::condition_variable heartbeat_cv;
  std::thread heartbeat;
};

WorkerDaemon::WorkerDaemon(WorkerOptions options)
    : options_(std::move(options)), state_(std::make_unique<State>(options_)) {}

WorkerDaemon::~WorkerDaemon() = default;

void WorkerDaemon::Stop() {
  state_->stop_requested = true;
  state_->stopping = true;
  state_->context.TryCancel();
  state_->heartbeat_cv.notify_all();
}

int WorkerDaemon::Run() {
  State& s = *state_;
  auto channel = grpc::CreateChannel(options_.coordinator, ChannelCredentials(options_.tls));
  if (std::optional<int> code = s.AwaitCoordinator(*channel)) return *code;
  ControlHandlers handlers(options_, s);
  if (!s.Attach(channel, handlers)) return 1;
  s.StartHeartbeat(handlers.heartbeat_interval());

  proto::CoordinatorMessage message;
  After after = After::kReadOn;
  while (after == After::kReadOn && !handlers.failed() && s.stream->Read(&message)) {
    after = handlers.Handle(message);
  }
  if (after == After::kAwaitVerdict) after = s.ReadUntilVerdict(handlers);
  if (after == After::kExitNow) ExitNow(1);
  return s.Leave(handlers);
}

std::optional<int> WorkerDaemon::State::AwaitCoordinator(grpc::Channel& channel) {
  const auto give_up = std::chrono::system_clock::now() + options.connect_timeout;
  spdlog::info("connecting to the coordinator at {}{}", options.coordinator,
               options.tls.enabled ? " over TLS" : "");
  while (!channel.WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(1))) {
    if (stop_requested) return 0;
    if (std::chrono::system_clock::now() > give_up) {
      spdlog::error("cannot reach the coordinator at {} after {} s ({})", options.coordinator,
                    options.connect_timeout.count(), TlsHint(options.tls));
      return 1;
    }
  }
  return std::nullopt;
}

bool WorkerDaemon::State::Attach(const std::shared_ptr<grpc::Channel>& channel,
                                 ControlHandlers& handlers) {
  stub = proto::Coordinator::NewStub(channel);
  AttachCredentials(options.credentials, context);
  stream = stub->Attach(&context);
  proto::CoordinatorMessage message;
  const bool closed = !Send(Hello(options)) || !stream->Read(&message);
  if (!closed && message.has_welcome()) {
    return handlers.OnWelcome(message.welcome()) == After::kReadOn;
  }
  // A closed stream carries the coordinator's reason (a wrong token, say):
  // Finish() returns it. Only a stream still open, that sent something other
  // than a Welcome, needs cancelling first, or Finish() would wait for it;
  // cancelling a closed one would replace the reason with CANCELLED.
  if (!closed) context.TryCancel();
  const grpc::Status status = stream->Finish();
  if (status.ok()) {  // a coordinator that closed the stream without saying why
    spdlog::error("the coordinator closed the stream before welcoming this worker");
  } else {
    spdlog::error("the coordinator refused this worker: {}", FromGrpcStatus(status).ToString());
  }
  return false;
}

void WorkerDaemon::State::StartHeartbeat(std::chrono::milliseconds every) {
  heartbeat = std::thread([this, every] {
    proto::WorkerMessage beat;
    beat.mutable_heartbeat();
    std::unique_lock lock(heartbeat_mu);
    while (!heartbeat_cv.wait_for(lock, every, [&] { return stopping.load(); })) {
      if (!Send(beat)) break;
    }
  });
}

void WorkerDaemon::State::StopHeartbeat() {
  stopping = true;
  heartbeat_cv.notify_all();
  if (heartbeat.joinable()) heartbeat.join();
}

After WorkerDaemon::State::ReadUntilVerdict(ControlHandlers& handlers) {
  std::mutex mu;
  std::condition_variable cv;
  bool read_ended = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, kVerdictGrace, [&] { return read_ended; })) context.TryCancel();
  });
  After after = After::kReadOn;
  proto::CoordinatorMessage message;
  while (after == After::kReadOn && stream->Read(&message)) after = handlers.Handle(message);
  {
    std::lock_guard lock(mu);
    read_ended = true;
  }
  cv.notify_all();
  watchdog.join();
  return after;
}

int WorkerDaemon::State::Leave(ControlHandlers& handlers) {
  const bool sweep_blocked = handlers.sweeping();
  StopHeartbeat();
  int code = 1;
  if (handlers.failed()) {
    // Logged where it failed.
  } else if (stop_requested) {
    code = 0;
  } else {
    spdlog::error("lost the coordinator at {}: {}", options.coordinator,
                  stream->Finish().error_message());
    code = kLostCoordinator;
  }
  // A sweep in flight cannot be interrupted inside UCX: leave at once.
  if (sweep_blocked) ExitNow(code);
  handlers.WaitForSweep();
  if (code == 0) spdlog::info("stopped");
  return code;
}

}  // namespace testbed
