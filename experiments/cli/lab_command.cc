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
#include "common/signal_waiter.h"
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
  cmd->add_option("--log-dir", options.log_dir,
                  "Folder for the daemons' logs (default: a new one under /tmp, removed at exit)");
  cmd->footer(
      "Examples:\n  testbed lab                      (then open http://127.0.0.1:8080/)\n"
      "  testbed lab --listen 127.0.0.1:0 --workers 4");
  return cmd;
}

int RunLab(const LabOptions& options) {
  const std::optional<ListenAddress> address = ParseListen(options.listen);
  if (!address) {
    std::cerr << "error: --listen " << options.listen << ": write HOST:PORT (port 0..65535)\n";
    return 2;
  }
  // One job for the lab's daemons: they inherit these, nothing else can join.
  // A token the teacher set (TESTBED_TOKEN) is kept, so a printed address stays valid.
  const char* set_token = std::getenv("TESTBED_TOKEN");
  const Credentials credentials{absl::StrCat("lab-", getpid()),
                                set_token != nullptr && *set_token != '\0' ? set_token
                                                                          : RandomHex(16)};
  // The control plane's rule: off loopback, every call needs the job's token.
  const bool needs_token = !IsLoopback(address->host);
  setenv("TESTBED_JOB_ID", credentials.job_id.c_str(), 1);
  setenv("TESTBED_TOKEN", credentials.token.c_str(), 1);
  setenv("UCX_NET_DEVICES", "lo", /*overwrite=*/0);  // as testbed local on loopback
  const std::string log_dir = MakeLogDir(options.log_dir);
  if (log_dir.empty()) {
    std::cerr << "error: cannot create a log folder under /tmp\n";
    return 1;
  }

  int code = 0;
  {
    // Destroyed in reverse: the runner (its run cancelled) before the signal
    // thread, the cluster (its daemons ended) after both.
    httplib::Server server;
    LabCluster cluster(credentials, log_dir);
    SignalWaiter waiter([&](int) {  // before any thread starts
      server.stop();
      cluster.Cancel();
    });
    LabRunner runner([&cluster](const proto::ExperimentSpec& spec, const auto& on_row,
                                std::ostream& progress) {
      return cluster.Run(spec, on_row, progress);
    });
    AddLabRoutes(server, runner, options.workers, needs_token ? credentials.token : "");
    ListenAlone(server);
    const int port = address->port == 0 ? server.bind_to_any_port(address->host)
                                        : (server.bind_to_port(address->host, address->port)
                                               ? address->port
                                               : -1);
    if (port < 0) {
      std::cerr << "error: cannot listen on " << options.listen << "\n";
      code = 1;
    } else {
      // Students open this address; off loopback it carries the token.
      const std::string query = needs_token ? "?token=" + credentials.token : "";
      if (needs_token) {
        std::fprintf(stderr,
                     "testbed lab: serving %s off loopback: the API asks for the token, over "
                     "plain HTTP - use it on a class network, not the open internet\n",
                     address->host.c_str());
      }
      std::printf("testbed lab: open http://%s:%d/%s (Ctrl-C ends the lab and its daemons; "
                  "logs in %s)\n",
                  address->host.c_str(), port, query.c_str(), log_dir.c_str());
      std::fflush(stdout);
      server.listen_after_bind();
    }
    cluster.Cancel();  // listening ended for another reason: no run starts now
  }
  if (options.log_dir.empty()) fs::remove_all(log_dir);
  return code;
}

}  // namespace testbed
