#include "worker/worker_daemon.h"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <algorithm>
#include <mutex>
#include <regex>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "allreduce/transport/ucx_settings.h"
#include "allreduce/transport/ucx_transport.h"
#include "proto/control.grpc.pb.h"
#include "proto/grpc_status.h"
#include "worker/interface_counters.h"
#include "worker/ps_client.h"
#include "worker/sweep_runner.h"

namespace testbed {
namespace {

using Stream = grpc::ClientReaderWriter<proto::WorkerMessage, proto::CoordinatorMessage>;

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// "ucx:tcp/lo.0" - what UCX chose to reach the next rank, for the results.
std::string TransportLabel(const UcxTransport& transport) {
  if (transport.world_size() == 1) return "ucx:none";
  const int next = (transport.rank() + 1) % transport.world_size();
  const std::string lanes = UcxLanes(transport.DescribeEndpoint(next));
  return absl::StrCat("ucx:", lanes.empty() ? "unknown" : lanes);
}

// Ends the process at once: used when a sweep thread may be blocked inside
// UCX, where neither joining nor destroying it is safe.
// How long a worker whose sweep failed waits for the coordinator's Abort
// before leaving: above the coordinator's 2 s hold-back on peer reports.
constexpr auto kVerdictGrace = std::chrono::seconds(5);

[[noreturn]] void ExitNow(int code) {
  spdlog::default_logger()->flush();
  std::_Exit(code);
}

}  // namespace

struct WorkerDaemon::State {
  grpc::ClientContext context;
  std::mutex write_mu;  // one writer at a time on the stream
  std::unique_ptr<Stream> stream;
  std::atomic<bool> stop_requested{false};  // Stop() was called
  std::atomic<bool> stopping{false};        // the heartbeat thread should end
  std::atomic<bool> failed{false};
  std::mutex heartbeat_mu;
  std::condition_variable heartbeat_cv;

  bool Send(const proto::WorkerMessage& message) {
    std::lock_guard lock(write_mu);
    return stream->Write(message);
  }
  void SendFailure(std::uint64_t experiment_id, const std::string& why) {
    proto::WorkerMessage message;
    message.mutable_failure()->set_experiment_id(experiment_id);
    message.mutable_failure()->set_message(why);
    Send(message);
  }
};

WorkerDaemon::WorkerDaemon(WorkerOptions options)
    : options_(std::move(options)), state_(std::make_unique<State>()) {}

WorkerDaemon::~WorkerDaemon() = default;

void WorkerDaemon::Stop() {
  state_->stop_requested = true;
  state_->stopping = true;
  state_->context.TryCancel();
  state_->heartbeat_cv.notify_all();
}

int WorkerDaemon::Run() {
  State& s = *state_;
  auto channel = grpc::CreateChannel(options_.coordinator, grpc::InsecureChannelCredentials());
  const auto give_up = std::chrono::system_clock::now() + options_.connect_timeout;
  spdlog::info("connecting to the coordinator at {}", options_.coordinator);
  while (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(1))) {
    if (s.stop_requested) return 0;
    if (std::chrono::system_clock::now() > give_up) {
      spdlog::error("cannot reach the coordinator at {} after {} s", options_.coordinator,
                    options_.connect_timeout.count());
      return 1;
    }
  }
  auto stub = proto::Coordinator::NewStub(channel);
  AttachCredentials(options_.credentials, s.context);
  s.stream = stub->Attach(&s.context);

  proto::WorkerMessage hello;
  hello.mutable_hello()->set_host(HostName());
  hello.mutable_hello()->set_pid(getpid());
  hello.mutable_hello()->set_version(TESTBED_VERSION);
  proto::CoordinatorMessage message;
  const bool closed = !s.Send(hello) || !s.stream->Read(&message);
  if (closed || !message.has_welcome()) {
    // A closed stream carries the coordinator's reason (a wrong token, say):
    // Finish() returns it. Only a stream still open, that sent something
    // other than a Welcome, needs cancelling first, or Finish() would wait
    // for it; cancelling a closed one would replace the reason with CANCELLED.
    if (!closed) s.context.TryCancel();
    const grpc::Status status = s.stream->Finish();
    spdlog::error("the coordinator refused this worker: {}", FromGrpcStatus(status).ToString());
    return 1;
  }
  spdlog::info("attached as worker {}", message.welcome().worker_id());

  const auto heartbeat_every = std::chrono::milliseconds(message.welcome().heartbeat_ms());
  std::thread heartbeat([&] {
    proto::WorkerMessage beat;
    beat.mutable_heartbeat();
    std::unique_lock lock(s.heartbeat_mu);
    while (!s.heartbeat_cv.wait_for(lock, heartbeat_every, [&] { return s.stopping.load(); })) {
      if (!s.Send(beat)) break;
    }
  });

  proto::ExperimentSpec spec;
  std::uint64_t experiment_id = 0;
  std::unique_ptr<UcxTransport> transport;
  std::unique_ptr<PsClient> parameter_server;
  std::string transport_label;
  std::thread sweep;
  std::atomic<bool> sweeping{false};
  const auto fail = [&](const std::string& why) {
    spdlog::error("experiment {}: {}", experiment_id, why);
    s.SendFailure(experiment_id, why);
    s.failed = true;
  };

  while (!s.failed && s.stream->Read(&message)) {
    switch (message.kind_case()) {
      case proto::CoordinatorMessage::kPrepare: {
        if (sweep.joinable()) sweep.join();  // the previous experiment ended
        transport.reset();
        parameter_server.reset();
        const proto::Prepare& prepare = message.prepare();
        experiment_id = prepare.experiment_id();
        spec = prepare.spec();
        if (prepare.shard_addresses_size() > 0) {
          parameter_server = std::make_unique<PsClient>(
              std::vector<std::string>(prepare.shard_addresses().begin(),
                                       prepare.shard_addresses().end()),
              options_.credentials, std::chrono::seconds(spec.timeout_s() ? spec.timeout_s() : 60));
        }
        UcxOptions ucx;
        ucx.wait_timeout = std::chrono::seconds(spec.timeout_s() ? spec.timeout_s() : 60);
        ucx.peer_error_handling =
            WantPeerErrorHandling(options_.peer_error_handling, std::getenv("UCX_TLS"));
        auto created = UcxTransport::Create(prepare.rank(), prepare.world_size(), ucx);
        if (!created.ok()) {
          fail(absl::StrCat("cannot create a UCX transport: ", created.status().ToString()));
          break;
        }
        transport = std::move(*created);
        spdlog::info("experiment {}: rank {} of {}", experiment_id, prepare.rank(),
                     prepare.world_size());
        proto::WorkerMessage address;
        address.mutable_address()->set_experiment_id(experiment_id);
        const std::vector<std::byte> bytes = transport->WorkerAddress();
        address.mutable_address()->set_ucx_address(
            std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
        s.Send(address);
        break;
      }
      case proto::CoordinatorMessage::kConnect: {
        if (!transport) break;
        std::vector<std::vector<std::byte>> addresses;
        for (const std::string& a : message.connect().ucx_addresses()) {
          const auto* p = reinterpret_cast<const std::byte*>(a.data());
          addresses.emplace_back(p, p + a.size());
        }
        if (absl::Status st = transport->Connect(addresses); !st.ok()) {
          fail(absl::StrCat("cannot connect to the other ranks: ", st.ToString()));
          break;
        }
        transport_label = TransportLabel(*transport);
        spdlog::info("experiment {}: connected over {}", experiment_id, transport_label);
        proto::WorkerMessage ready;
        ready.mutable_ready()->set_experiment_id(experiment_id);
        s.Send(ready);
        break;
      }
      case proto::CoordinatorMessage::kStart: {
        if (!transport) break;
        sweeping = true;
        sweep = std::thread([&, id = experiment_id] {
          SweepEnvironment env;
          env.transport = transport.get();
          env.transport_label = transport_label;
          env.parameter_server = parameter_server.get();
          env.tensor_prefix = absl::StrCat("experiment-", id);
          env.net_device = RankNetDevice(options_.net_device, std::getenv("UCX_NET_DEVICES"));
          const absl::Status st =
              RunSweep(spec, env, [&](const proto::RankResult& result) {
                proto::WorkerMessage m;
                *m.mutable_result() = result;
                return s.Send(m) ? absl::OkStatus()
                                 : absl::UnavailableError("lost the coordinator");
              });
          if (st.ok()) {
            proto::WorkerMessage finished;
            finished.mutable_finished()->set_experiment_id(id);
            s.Send(finished);
            spdlog::info("experiment {}: done", id);
          } else {
            fail(std::string(st.message()));
            // Stay, endpoints open, for the coordinator's verdict: leaving
            // now would make the ranks that talk to this one see *it* lost
            // and name it, not the rank that really failed. The reader ends
            // the process when the Abort comes; without one (no coordinator)
            // it is woken after the grace period.
            std::unique_lock lock(s.heartbeat_mu);
            s.heartbeat_cv.wait_for(lock, kVerdictGrace, [&] { return s.stopping.load(); });
            lock.unlock();
            s.context.TryCancel();  // wakes the reader
          }
          sweeping = false;
        });
        break;
      }
      case proto::CoordinatorMessage::kAbort:
        spdlog::error("experiment {} aborted by the coordinator: {}",
                      message.abort().experiment_id(), message.abort().reason());
        s.failed = true;
        if (sweeping) ExitNow(1);
        break;
      default:
        break;
    }
  }

  const bool sweep_blocked = sweeping.load();
  s.stopping = true;
  s.heartbeat_cv.notify_all();
  heartbeat.join();
  if (s.failed) {
    if (sweep_blocked) ExitNow(1);
    if (sweep.joinable()) sweep.join();
    return 1;
  }
  if (s.stop_requested) {
    // A sweep in flight cannot be interrupted inside UCX: leave at once.
    if (sweep_blocked) ExitNow(0);
    if (sweep.joinable()) sweep.join();
    spdlog::info("stopped");
    return 0;
  }
  spdlog::error("lost the coordinator at {}: {}", options_.coordinator,
                s.stream->Finish().error_message());
  if (sweep_blocked) ExitNow(1);
  if (sweep.joinable()) sweep.join();
  return 1;
}

}  // namespace testbed
