#include "experiments/cli/lab_command.h"

#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>

#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/link_units.h"
#include "common/signal_waiter.h"
#include "experiments/cli/cli_common.h"
#include "experiments/cli/setting_flags.h"
#include "experiments/cli/submission.h"
#include "experiments/lab/lab_cluster.h"
#include "experiments/lab/lab_runner.h"
#include "experiments/lab/lab_server.h"
#include "experiments/lab/lab_trace.h"
#include "proto/tls.h"

namespace testbed {
namespace fs = std::filesystem;
namespace {

struct ListenAddress {
  std::string host;
  int port = 0;
};

// "127.0.0.1:8080" -> {host, port}; the port may be 0 (any free one).
std::optional<ListenAddress> ParseListen(const std::string& text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  ListenAddress address{text.substr(0, colon), 0};
  const char* begin = text.data() + colon + 1;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(begin, end, address.port);
  if (error != std::errc() || stop != end || begin == end || address.port < 0 ||
      address.port > 65535) {
    return std::nullopt;
  }
  return address;
}

std::string MakeLogDir(const std::string& asked) {
  if (!asked.empty()) {
    fs::create_directories(asked);
    return asked;
  }
  std::string pattern = (fs::temp_directory_path() / "testbed-lab-XXXXXX").string();
  return mkdtemp(pattern.data()) == nullptr ? "" : pattern;
}

// True when `name` is an executable file in a folder of $PATH.
bool OnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  for (const auto& dir : absl::StrSplit(path, ':')) {
    if (!dir.empty() && access((fs::path(std::string(dir)) / name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

// Where the lab's runs go is decided before anything starts: an emulated
// cluster the lab cannot build is refused here, with what it needs, rather
// than on the first run from the page. Returns an exit code, 0 to go on.
int CheckDeployment(const LabOptions& options) {
  const bool netns = options.network == proto::Network::netns;
  if (!options.coordinator.empty() && netns) {
    std::cerr << "error: --coordinator uses daemons already running; --network netns starts "
                 "its own: choose one\n";
    return 2;
  }
  if (!netns && options.link_rate_bps != 0) {
    std::cerr << "error: --link-rate needs --network netns (loopback has no links to limit)\n";
    return 2;
  }
  if (!netns) return 0;
  if (geteuid() != 0) {
    std::cerr << "error: --network netns needs root (it creates network namespaces, links and "
                 "tc limits); run the lab as root, or leave out --network for loopback\n";
    return 2;
  }
  for (const char* tool : {"ip", "tc"}) {
    if (!OnPath(tool)) {
      std::cerr << "error: --network netns needs iproute2's `" << tool
                << "` on PATH (apt-get install iproute2)\n";
      return 2;
    }
  }
  return 0;
}

// The daemons' UCX, as `testbed local` sets it: in the emulated cluster TCP
// over each node's one link (shared memory would bypass the links measured);
// on loopback, lo. Compose's daemons have their own settings.
void SetDaemonTransport(const LabOptions& options) {
  if (options.network != proto::Network::netns) {
    setenv("UCX_NET_DEVICES", "lo", /*overwrite=*/0);
    return;
  }
  for (const auto& [name, value] :
       {std::pair{"UCX_TLS", "tcp"}, std::pair{"UCX_NET_DEVICES", NetnsFabric::kNodeDevice}}) {
    if (const char* set = std::getenv(name); set != nullptr && std::string(set) != value) {
      std::cerr << "testbed lab: --network netns sets " << name << "=" << value << " (was "
                << set << ")\n";
    }
    setenv(name, value, /*overwrite=*/1);
  }
}

// The job of the lab's runs. The lab's own daemons inherit it and nothing else
// can join; a token the teacher set (TESTBED_TOKEN) is kept, so a printed
// address stays valid. Daemons already running (--coordinator) were started
// with a job id and token, which the lab must be given: nullopt without them.
std::optional<Credentials> LabCredentials(const LabOptions& options) {
  const char* set_token = std::getenv("TESTBED_TOKEN");
  const char* set_job = std::getenv("TESTBED_JOB_ID");
  const bool has_token = set_token != nullptr && *set_token != '\0';
  if (!options.coordinator.empty()) {
    if (!has_token || set_job == nullptr || *set_job == '\0') {
      std::cerr << "error: --coordinator needs the daemons' TESTBED_JOB_ID and TESTBED_TOKEN "
                   "in the environment\n";
      return std::nullopt;
    }
    return Credentials{set_job, set_token};
  }
  return Credentials{absl::StrCat("lab-", getpid()), has_token ? set_token : RandomHex(16)};
}

std::string DeploymentText(const LabOptions& options) {
  if (!options.coordinator.empty()) return "the daemons of " + options.coordinator;
  if (options.network != proto::Network::netns) return "its own daemons on loopback";
  return "its own daemons in network namespaces, links " +
         (options.link_rate_bps == 0 ? std::string("unlimited")
                                     : FormatLinkRate(options.link_rate_bps));
}

LabInfo PageInfo(const LabOptions& options) {
  return {.max_workers = options.workers,
          .runs_on = DeploymentText(options),
          .link_gbit = static_cast<double>(options.link_rate_bps) / 1e9};
}

// Serves the page until Ctrl-C; returns the exit code.
int ServeLab(const LabOptions& options, const ListenAddress& address,
             const Credentials& credentials, const std::string& log_dir) {
  // The control plane's rule: off loopback, every call needs the job's token.
  const bool needs_token = !IsLoopback(address.host);
  // Destroyed in reverse: the runner (its run cancelled) before the signal
  // thread, the cluster (its daemons ended) after both.
  httplib::Server server;
  LabCluster cluster(credentials, {.log_dir = log_dir,
                                   .coordinator = options.coordinator,
                                   .netns = options.network == proto::Network::netns,
                                   .link_rate_bps = options.link_rate_bps});
  SignalWaiter waiter([&](int) {  // before any thread starts
    server.stop();
    cluster.Cancel();
  });
  LabRunner runner([&cluster](const proto::ExperimentSpec& spec, const auto& on_row,
                              std::ostream& progress) {
    return cluster.Run(spec, on_row, progress);
  });
  AddLabRoutes(server, runner, PageInfo(options), needs_token ? credentials.token : "");
  ListenAlone(server);
  LimitClients(server);
  const int port = address.port == 0
                       ? server.bind_to_any_port(address.host)
                       : (server.bind_to_port(address.host, address.port) ? address.port : -1);
  if (port < 0) {
    std::cerr << "error: cannot listen on " << options.listen << "\n";
    cluster.Cancel();
    return 1;
  }
  // Students open this address; off loopback it carries the token.
  const std::string query = needs_token ? "?token=" + credentials.token : "";
  if (needs_token) {
    std::fprintf(stderr,
                 "testbed lab: serving %s off loopback: the API asks for the token, over "
                 "plain HTTP - use it on a class network, not the open internet\n",
                 address.host.c_str());
  }
  std::fprintf(stderr, "testbed lab: runs go to %s\n", DeploymentText(options).c_str());
  std::printf("testbed lab: open http://%s:%d/%s (Ctrl-C ends the lab%s; logs in %s)\n",
              address.host.c_str(), port, query.c_str(),
              options.coordinator.empty() ? " and its daemons" : "", log_dir.c_str());
  std::fflush(stdout);
  server.listen_after_bind();
  cluster.Cancel();  // listening ended for another reason: no run starts now
  return 0;
}

}  // namespace

CLI::App* AddLabCommand(CLI::App& app, LabOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "lab",
      "Serve the classroom lab: one offline web page over the real testbed - step through a "
      "collective's executor trace, predict and then measure a run on a local cluster of "
      "daemons the lab starts, the ZeRO and pipeline-bubble calculators, and the course "
      "table of every run of the session.");
  cmd->add_option("--listen", options.listen,
                  "HOST:PORT to serve on; port 0 picks a free one. Off loopback the API asks "
                  "for the job token (TESTBED_TOKEN, else a new one), which the printed "
                  "address carries")
      ->capture_default_str();
  cmd->add_option("--workers", options.workers, "The largest N a run from the page may use")
      ->check(CLI::Range(1, kLabMaxWorkers))
      ->capture_default_str();
  AddLogDirFlag(*cmd, options.log_dir);
  AddNetworkFlag(*cmd, options.network);
  AddLinkRateFlag(*cmd, options.link_rate_bps);
  cmd->add_option("--coordinator", options.coordinator,
                  "HOST:PORT of a testbed-server whose workers are already running (compose's, "
                  "docker/lab.yml): runs go there, and the lab starts no daemons. They must "
                  "share the lab's TESTBED_JOB_ID and TESTBED_TOKEN");
  cmd->footer(
      LabLimitsText() + "\n"
      "Examples:\n  testbed lab                      (then open http://127.0.0.1:8080/)\n"
      "  testbed lab --listen 127.0.0.1:0 --workers 4\n"
      "  sudo testbed lab --network netns --link-rate 1gbit --workers 4\n"
      "  testbed lab --listen 0.0.0.0:8080 --coordinator server:50051   (docker/lab.yml)");
  return cmd;
}

int RunLab(const LabOptions& options) {
  const std::optional<ListenAddress> address = ParseListen(options.listen);
  if (!address) {
    std::cerr << "error: --listen " << options.listen << ": write HOST:PORT (port 0..65535)\n";
    return 2;
  }
  if (const int code = CheckDeployment(options); code != 0) return code;
  const std::optional<Credentials> credentials = LabCredentials(options);
  if (!credentials) return 2;
  setenv("TESTBED_JOB_ID", credentials->job_id.c_str(), 1);
  setenv("TESTBED_TOKEN", credentials->token.c_str(), 1);
  SetDaemonTransport(options);
  const std::string log_dir = MakeLogDir(options.log_dir);
  if (log_dir.empty()) {
    std::cerr << "error: cannot create a log folder under /tmp\n";
    return 1;
  }
  const int code = ServeLab(options, *address, *credentials, log_dir);
  if (options.log_dir.empty()) fs::remove_all(log_dir);
  return code;
}

}  // namespace testbed
