// testbed-worker: a long-lived worker daemon. It attaches to the coordinator
// and runs whatever experiments are submitted there.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include <unistd.h>  // environ

#include <CLI/CLI.hpp>
#include <spdlog/cfg/env.h>
#include <spdlog/spdlog.h>

#include "allreduce/transport/ucx_settings.h"
#include "common/memory_reuse.h"
#include "common/signal_waiter.h"
#include "worker/worker_daemon.h"

int main(int argc, char** argv) {
  testbed::KeepFreedMemoryForReuse();
  CLI::App app(
      "testbed-worker: attaches to the coordinator and runs the experiments submitted there, "
      "over UCX (choose UCX transports with UCX_TLS). The job id and token come from "
      "TESTBED_JOB_ID and TESTBED_TOKEN.",
      "testbed-worker");
  testbed::WorkerOptions options;
  int connect_timeout_s = 120;
  int reconnect_s = 300;
  app.add_option("-c,--coordinator", options.coordinator, "The coordinator's HOST:PORT")
      ->required();
  app.add_option("--connect-timeout", connect_timeout_s,
                 "Seconds to keep trying to reach the coordinator")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--reconnect", reconnect_s,
                 "When the coordinator goes away (restarted by compose or Kubernetes), keep "
                 "trying to attach again for this many seconds, backing off from 0.5 s to 10 s "
                 "between tries, and rejoin the next experiment; 0: exit at once (status 3)")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  app.add_option("--peer-error-handling", options.peer_error_handling,
                 "UCX peer failure detection: auto (on unless UCX_TLS is shared memory only), "
                 "on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_option("--net-device", options.net_device,
                 "This worker's own network interface, whose counters give wire bytes "
                 "(default: the one device UCX_NET_DEVICES names; 'none' for none; loopback "
                 "never counts, since all local ranks share it)");
  app.add_option("--worker-id", options.worker_id,
                 "The number to be known by in the coordinator's messages and errors (e.g. the "
                 "index a harness gives this worker), when no other attached worker has it "
                 "(default: the lowest free number)");
  testbed::TlsFlags tls_flags;
  testbed::AddTlsFlags(app, tls_flags);
  CLI11_PARSE(app, argc, argv);
  // Before UCX reads its environment; the user's own UCX_* settings win.
  const std::vector<testbed::UcxSetting> ucx_defaults = testbed::ApplyUcxDefaults();
  options.ucx_environment = testbed::DescribeUcxEnvironment(environ, ucx_defaults);
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL=debug for more
  options.connect_timeout = std::chrono::seconds(connect_timeout_s);

  auto credentials = testbed::CredentialsFromEnvironment();
  if (!credentials.ok()) {
    spdlog::critical("{}", credentials.status().ToString());
    return 2;
  }
  options.credentials = *credentials;
  absl::StatusOr<testbed::Tls> tls = testbed::LoadTls(tls_flags, /*need_identity=*/false);
  if (!tls.ok()) {
    spdlog::critical("{}", std::string(tls.status().message()));
    return 2;
  }
  options.tls = *std::move(tls);
  if (const std::string warning = testbed::PlaintextWarning(options.tls, options.coordinator);
      !warning.empty()) {
    spdlog::warn("{}", warning);
  }

  // One daemon per attachment: a coordinator that goes away and comes back
  // gets a fresh one, after a backoff a signal cuts short.
  std::mutex mu;
  std::condition_variable stopped_cv;
  bool stopped = false;
  testbed::WorkerDaemon* current = nullptr;
  testbed::SignalWaiter waiter([&](int signal) {
    spdlog::info("signal {}: stopping", signal);
    std::lock_guard lock(mu);
    stopped = true;
    if (current != nullptr) current->Stop();
    stopped_cv.notify_all();
  });
  auto backoff = std::chrono::milliseconds(500);
  for (;;) {
    testbed::WorkerDaemon daemon(options);
    {
      std::lock_guard lock(mu);
      if (stopped) return 0;
      current = &daemon;
    }
    const int code = daemon.Run();
    {
      std::lock_guard lock(mu);
      current = nullptr;
    }
    if (code != testbed::kLostCoordinator || reconnect_s == 0) return code;
    spdlog::info("attaching to the coordinator again in {} ms (for up to {} s)", backoff.count(),
                 reconnect_s);
    std::unique_lock lock(mu);
    if (stopped_cv.wait_for(lock, backoff, [&] { return stopped; })) return 0;
    backoff = std::min<std::chrono::milliseconds>(2 * backoff, std::chrono::seconds(10));
    options.connect_timeout = std::chrono::seconds(reconnect_s);
  }
}
