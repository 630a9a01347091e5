// testbed-server: the coordinator daemon. Long-lived; experiments are
// submitted to it (`testbed run`, `testbed local`), never baked into its flags.
#include <unistd.h>

#include <fstream>
#include <memory>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>
#include <spdlog/cfg/env.h>
#include <spdlog/spdlog.h>

#include "proto/credentials.h"
#include "server/coordinator_service.h"
#include "server/signal_waiter.h"

int main(int argc, char** argv) {
  CLI::App app(
      "testbed-server: the coordinator. Workers attach to it; `testbed run` submits experiments "
      "to it. The job id and token come from TESTBED_JOB_ID and TESTBED_TOKEN.",
      "testbed-server");
  std::string listen = "0.0.0.0:50051";
  std::string port_file;
  int heartbeat_timeout_s = 10;
  app.add_option("-l,--listen", listen, "Address to listen on; port 0 picks a free port")
      ->capture_default_str();
  app.add_option("--port-file", port_file, "Write the port listened on to this file, once ready");
  app.add_option("--heartbeat-timeout", heartbeat_timeout_s,
                 "Seconds of silence after which a worker counts as lost")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL=debug for more

  std::unique_ptr<grpc::Server> server;
  auto credentials = testbed::CredentialsFromEnvironment();
  if (!credentials.ok()) {
    spdlog::critical("{}", credentials.status().ToString());
    return 2;
  }
  testbed::CoordinatorOptions options;
  options.credentials = *credentials;
  options.heartbeat_timeout = std::chrono::seconds(heartbeat_timeout_s);
  testbed::CoordinatorService service(options);

  std::mutex stop_mu;
  bool stopping = false;
  testbed::SignalWaiter waiter([&](int signal) {
    spdlog::info("signal {}: shutting down", signal);
    std::lock_guard lock(stop_mu);
    stopping = true;
    service.Shutdown();
    if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  });

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  {
    std::lock_guard lock(stop_mu);
    if (stopping) return 0;
    server = builder.BuildAndStart();
  }
  if (!server || port == 0) {
    spdlog::critical("cannot listen on {}", listen);
    return 1;
  }
  spdlog::info("testbed-server {} listening on port {} for job {}", TESTBED_VERSION, port,
               credentials->job_id);
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    std::rename(tmp.c_str(), port_file.c_str());  // readers never see half a file
  }
  server->Wait();
  spdlog::info("stopped");
  return 0;
}
