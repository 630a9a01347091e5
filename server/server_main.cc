// testbed-server: the coordinator and a parameter-server shard in one daemon.
// Long-lived; experiments are submitted to it (`testbed run`, `testbed
// local`), never baked into its flags. Started with --join, it is a shard
// only: it offers its parameter-server shard to the coordinator there.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <thread>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>
#include <spdlog/cfg/env.h>
#include <spdlog/spdlog.h>

#include "common/byte_size.h"
#include "proto/control.grpc.pb.h"
#include "proto/credentials.h"
#include "proto/tls.h"
#include "server/coordinator_service.h"
#include "common/memory_reuse.h"
#include "server/parameter_server_service.h"
#include "server/parameter_store.h"
#include "common/signal_waiter.h"

namespace {

// The largest message either service reads. Pushes and pulls travel in chunks
// of 1 MiB (ParameterStore::kDefaultChunkBytes) plus framing, and the other
// messages are small; gRPC refuses a bigger one with RESOURCE_EXHAUSTED,
// naming both sizes, before any handler sees it.
constexpr int kMaxMessageBytes = 16 << 20;

// Where others reach a server listening on `listen` at `port`.
std::string DefaultAdvertise(const std::string& listen, int port) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "[::]") {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    host = name;
  }
  return host + ":" + std::to_string(port);
}

// Offers this server's shard to the coordinator, retrying while it starts up.
bool JoinCoordinator(const std::string& coordinator, const std::string& advertise,
                     const testbed::Credentials& credentials, const testbed::Tls& tls,
                     int timeout_s) {
  auto stub = testbed::proto::Coordinator::NewStub(
      grpc::CreateChannel(coordinator, testbed::ChannelCredentials(tls)));
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (true) {
    grpc::ClientContext context;
    testbed::AttachCredentials(credentials, context);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    context.set_wait_for_ready(true);
    testbed::proto::ShardHello hello;
    hello.set_address(advertise);
    testbed::proto::ShardWelcome welcome;
    const grpc::Status st = stub->RegisterShard(&context, hello, &welcome);
    if (st.ok()) {
      spdlog::info("joined {} as parameter-server shard {}", coordinator, welcome.shard_id());
      return true;
    }
    if (st.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
        st.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
        std::chrono::steady_clock::now() > give_up) {
      const bool unreachable = st.error_code() == grpc::StatusCode::UNAVAILABLE ||
                               st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      spdlog::critical("cannot join the coordinator at {}: {}{}", coordinator, st.error_message(),
                       unreachable ? " (" + testbed::TlsHint(tls) + ")" : "");
      return false;
    }
  }
}

// testbed-server's flags, as given on its command line.
struct ServerFlags {
  std::string listen = "0.0.0.0:50051";
  std::string advertise;
  std::string join;
  std::string port_file;
  int heartbeat_timeout_s = 10;
  int join_timeout_s = 120;
  std::int64_t max_calls = testbed::CallLimiter::kDefaultMaxCalls;
  testbed::ParameterStore::Options store_options;
  testbed::TlsFlags tls_flags;
};

void AddServerFlags(CLI::App& app, ServerFlags& f) {
  // Sizes as people write them: 4096, 64KiB, 12GiB, 1GB (common/byte_size.h).
  const auto byte_size = [](const std::string& flag, std::int64_t& into) {
    return [flag, &into](const std::string& text) {
      absl::StatusOr<std::int64_t> bytes = testbed::ParseByteSize(text);
      if (!bytes.ok()) throw CLI::ValidationError(flag, std::string(bytes.status().message()));
      if (*bytes < 1) throw CLI::ValidationError(flag, "a limit needs at least one byte");
      into = *bytes;
    };
  };
  app.add_option("-l,--listen", f.listen, "Address to listen on; port 0 picks a free port")
      ->capture_default_str();
  app.add_option("--advertise", f.advertise,
                 "HOST:PORT where workers reach this server's parameter-server shard "
                 "(default: the listen host, or this host's name, and the port)");
  app.add_option("--join", f.join,
                 "Be a parameter-server shard only, for the coordinator at HOST:PORT");
  app.add_option("--join-timeout", f.join_timeout_s, "Seconds to keep trying to reach it")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--port-file", f.port_file, "Write the port listened on to this file, once ready");
  app.add_option("--heartbeat-timeout", f.heartbeat_timeout_s,
                 "Seconds of silence after which a worker counts as lost")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  const std::string memory_default =
      testbed::HumanByteSize(static_cast<double>(testbed::DefaultMaxTensorBytes()));
  app.add_option_function<std::string>(
      "--max-tensor-bytes", byte_size("--max-tensor-bytes", f.store_options.max_tensor_bytes),
      "The largest slice of one tensor this parameter-server shard holds, as SIZE (e.g. "
      "12GiB); larger declarations are refused (default: half this machine's memory, " +
          memory_default + ")")
      ->type_name("SIZE");
  app.add_option_function<std::string>(
      "--max-total-tensor-bytes",
      byte_size("--max-total-tensor-bytes", f.store_options.max_total_bytes),
      "The most bytes of all tensors this shard holds at once, as SIZE (default: half this "
      "machine's memory, " +
          memory_default + ", or --max-tensor-bytes if more)")
      ->type_name("SIZE");
  app.add_option("--max-tensors", f.store_options.max_tensors,
                 "The most tensors this parameter-server shard holds at once; more "
                 "declarations are refused until some are forgotten")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--max-calls", f.max_calls,
                 "The most calls (workers' control streams, pushes, pulls, submissions) this "
                 "server serves at once; more are refused (RESOURCE_EXHAUSTED) until some end")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20))
      ->capture_default_str();
  testbed::AddTlsFlags(app, f.tls_flags);
}

}  // namespace

int main(int argc, char** argv) {
  testbed::KeepFreedMemoryForReuse();
  CLI::App app(
      "testbed-server: the coordinator and a parameter-server shard. Workers attach to it; "
      "`testbed run` submits experiments to it. With --join it is one more parameter-server "
      "shard for the coordinator there. The job id and token come from TESTBED_JOB_ID and "
      "TESTBED_TOKEN.",
      "testbed-server");
  ServerFlags flags;
  AddServerFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  auto& [listen, advertise, join, port_file, heartbeat_timeout_s, join_timeout_s, max_calls,
         store_options, tls_flags] = flags;
  if (app.count("--max-total-tensor-bytes") == 0) {  // raising one tensor's limit raises both
    store_options.max_total_bytes =
        std::max(store_options.max_total_bytes, store_options.max_tensor_bytes);
  }
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL=debug for more

  auto credentials = testbed::CredentialsFromEnvironment();
  if (!credentials.ok()) {
    spdlog::critical("{}", credentials.status().ToString());
    return 2;
  }
  absl::StatusOr<testbed::Tls> tls = testbed::LoadTls(tls_flags, /*need_identity=*/true);
  if (!tls.ok()) {
    spdlog::critical("{}", std::string(tls.status().message()));
    return 2;
  }
  if (const std::string warning = testbed::PlaintextWarning(*tls, listen); !warning.empty()) {
    spdlog::warn("{}", warning);
  }
  testbed::ParameterStore store(store_options);
  auto calls = std::make_shared<testbed::CallLimiter>(max_calls);  // one bound for both services
  testbed::ParameterServerService parameter_server(store, *credentials, std::chrono::seconds(120),
                                                   calls);
  testbed::CoordinatorOptions options;
  options.credentials = *credentials;
  options.calls = calls;
  options.heartbeat_timeout = std::chrono::seconds(heartbeat_timeout_s);
  testbed::CoordinatorService coordinator(options);  // its shard address is set once known

  std::mutex stop_mu;
  bool stopping = false;
  std::unique_ptr<grpc::Server> server;
  testbed::SignalWaiter waiter([&](int signal) {
    spdlog::info("signal {}: shutting down", signal);
    std::lock_guard lock(stop_mu);
    stopping = true;
    coordinator.Shutdown();
    store.Shutdown();
    // Workers hold their streams open for good: cancel them at once.
    if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  });

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, testbed::ServerCredentials(*tls), &port);
  builder.RegisterService(&parameter_server);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  if (join.empty()) builder.RegisterService(&coordinator);
  {
    std::lock_guard lock(stop_mu);
    if (stopping) return 0;
    server = builder.BuildAndStart();
  }
  if (!server || port == 0) {
    spdlog::critical("cannot listen on {}{}", listen,
                     tls->enabled ? " (or the TLS certificate and key do not match)" : "");
    return 1;
  }
  if (advertise.empty()) advertise = DefaultAdvertise(listen, port);
  coordinator.SetOwnShardAddress(advertise);
  spdlog::info("testbed-server {} listening on port {} for job {}; parameter-server shard at {}",
               TESTBED_VERSION, port, credentials->job_id, advertise);
  spdlog::info("{}", !tls->enabled     ? "TLS off"
                     : tls->ca.empty() ? "TLS on (any client; the token alone admits calls)"
                                       : "mutual TLS on: clients need a certificate signed by "
                                         "--tls-ca");
  spdlog::info(
      "limits: {} per tensor, {} in all, {} tensors on this shard; {} calls at once; messages up "
      "to {}",
      testbed::HumanByteSize(static_cast<double>(store.max_tensor_bytes())),
      testbed::HumanByteSize(static_cast<double>(store.max_total_bytes())), store.max_tensors(),
      calls->max_calls(), testbed::HumanByteSize(kMaxMessageBytes));
  if (!join.empty() && !JoinCoordinator(join, advertise, *credentials, *tls, join_timeout_s)) {
    server->Shutdown();
    return 1;
  }
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    std::rename(tmp.c_str(), port_file.c_str());  // readers never see half a file
  }
  server->Wait();
  spdlog::info("stopped");
  return 0;
}
