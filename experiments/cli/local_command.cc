#include "experiments/cli/local_command.h"

#include <unistd.h>

#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "experiments/cli/experiment_client.h"
#include "experiments/cli/setting_flags.h"
#include "allreduce/cost_model.h"
#include "allreduce/data_type.h"
#include "experiments/results/course_table.h"
#include "common/link_units.h"
#include "experiments/cluster/local_cluster.h"
#include "experiments/cluster/log_folder.h"
#include "experiments/cluster/lost_daemon_watchdog.h"
#include "experiments/cluster/netns_fabric.h"
#include "proto/enum_text.h"
#include "proto/fabric_spec.h"
#include "proto/spec.h"
#include "common/signal_waiter.h"

#include "experiments/cli/submission.h"

namespace testbed {

CLI::App* AddLocalCommand(CLI::App& app, LocalOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "local",
      "Start a coordinator and N workers as child processes - on loopback, or with --network "
      "netns each in its own network namespace behind a rate-limited link - run the sweep "
      "over UCX (and gRPC for ps), print one row per (algorithm, size). Every process, "
      "namespace and link started is removed, also on failure and Ctrl-C. On loopback, choose "
      "UCX transports with UCX_TLS (e.g. UCX_TLS=tcp).");
  AddExperimentFlags(*cmd, options.experiment);
  AddLogDirFlag(*cmd, options.log_dir);
  cmd->add_flag("--keep-logs", options.keep_logs, "Keep the log folder after a successful run");
  AddTlsFlags(*cmd, options.tls);
  cmd->footer(
      "Examples:\n"
      "  testbed local --workers 4 --algorithms naive,ring,tree,butterfly --sizes 4KiB:16MiB\n"
      "  UCX_TLS=tcp testbed local -n 4 -a ring -s 16MiB --iters 20 --out results.jsonl\n"
      "  testbed local --spec experiments/specs/quick.textproto --format json\n"
      "  sudo testbed local --network netns --link-rate 1gbit -n 2,4,8 -s 64KiB:64MiB --out r.jsonl\n"
      "  sudo testbed local --spec experiments/specs/traffic_tradeoffs.textproto --out r.jsonl\n"
      "  testbed local --tls-dir certs/ -n 2 -a ring,ps -s 4KiB   (certs valid for 127.0.0.1)\n"
      "With --out R.jsonl a run also writes R.md, the course table of every run in R.jsonl\n"
      "(testbed report R.jsonl prints it again).");
  return cmd;
}

namespace {

// The emulated cluster's nodes: servers on the spine, worker i (rank i) in
// its rack of the spec's fabric, each link at its rate.
// Colocated, server s shares worker s's node and there are no server nodes.
NetnsFabricOptions FabricOptions(const proto::ExperimentSpec& spec, int servers, int workers) {
  const bool colocated = spec.fabric().server_placement() == proto::ServerPlacement::colocated;
  const int server_nodes = colocated ? 0 : servers;
  NetnsFabricOptions options{server_nodes + workers, static_cast<double>(spec.link_rate_bps()),
                             ""};
  const Placement placement = PlacementOf(spec.fabric(), workers);
  const LinkRates rates =
      LinkRatesOf(spec.fabric(), workers, static_cast<double>(spec.link_rate_bps()));
  options.node_rate_bps.assign(static_cast<std::size_t>(server_nodes), 0);
  options.node_rate_bps.insert(options.node_rate_bps.end(), rates.host_bps.begin(),
                               rates.host_bps.end());
  options.link_queue_us = LinkQueueMicros(spec.fabric());
  if (rates.uplink_bps.empty()) return options;
  options.uplink_rate_bps = rates.uplink_bps;
  options.rack_of_node.assign(static_cast<std::size_t>(server_nodes), -1);
  for (int w = 0; w < workers; ++w) options.rack_of_node.push_back(placement.RackOf(w));
  return options;
}

// Each row's share of the uplinks' counters: what they counted since the
// previous row arrived (proto/experiment.proto, uplink_wire_bytes_*). The
// groups of a split share the uplinks and arrive together: each of their rows
// carries the count of all of them, as its first group's row does.
class UplinkMeter {
 public:
  explicit UplinkMeter(const NetnsFabric* fabric) : fabric_(fabric) {
    if (fabric_ != nullptr && fabric_->racks() > 0) last_ = Read();
  }
  void Annotate(proto::ResultRow& row) {
    if (last_.empty()) return;
    if (row.group() == 0) {  // a new (algorithm, size): read what it sent
      const std::vector<UplinkBytes> now = Read();
      if (now.size() != last_.size()) return;
      counted_.clear();
      for (std::size_t r = 0; r < now.size(); ++r) {
        counted_.push_back({.up = now[r].up - last_[r].up, .down = now[r].down - last_[r].down});
      }
      last_ = now;
    }
    for (const UplinkBytes& uplink : counted_) {
      row.add_uplink_wire_bytes_up(uplink.up);
      row.add_uplink_wire_bytes_down(uplink.down);
    }
  }

 private:
  std::vector<UplinkBytes> Read() const {
    absl::StatusOr<std::vector<UplinkBytes>> counters = fabric_->UplinkCounters();
    return counters.ok() ? *counters : std::vector<UplinkBytes>{};
  }
  const NetnsFabric* fabric_;
  std::vector<UplinkBytes> last_;
  std::vector<UplinkBytes> counted_;  // the last (algorithm, size)'s, for its other groups
};

// One cluster (one N of a sweep): start it - on loopback or in an emulated
// cluster - submit, stop it. Returns the exit code.
int RunOneCluster(const LocalOptions& options, const proto::ExperimentSpec& spec,
                  const Credentials& credentials, const Tls& tls, const std::string& log_dir,
                  const Tuning& tuning, Interrupter& interrupter, RowSink& sink) {
  const int servers = UsesParameterServer(spec) ? static_cast<int>(spec.servers()) : 1;
  const int workers = static_cast<int>(spec.workers());
  const bool netns = spec.network() == proto::Network::netns;
  std::unique_ptr<NetnsFabric> fabric;
  std::string deployment = absl::StrCat("local, ", workers, " workers on loopback");
  if (netns) {
    const std::string link =
        spec.link_rate_bps() == 0 ? "unlimited" : FormatLinkRate(spec.link_rate_bps());
    absl::StatusOr<std::unique_ptr<NetnsFabric>> created =
        NetnsFabric::Create(FabricOptions(spec, servers, workers));
    if (!created.ok()) {
      std::cerr << "error: cannot build the emulated cluster: " << created.status().message()
                << "\n";
      return 1;
    }
    fabric = std::move(*created);
    deployment = absl::StrCat("local, ", workers, " workers and ", servers,
                              " servers in network namespaces (", fabric->tag(), "), links ",
                              link, ", fabric ", FabricSummary(spec.fabric()));
    std::cerr << "testbed local: emulated cluster " << fabric->tag() << ": " << fabric->nodes()
              << " nodes on " << fabric->address_of(0) << "/24, each link "
              << link << (spec.link_rate_bps() == 0 ? "" : " each way") << "; fabric "
              << FabricSummary(spec.fabric()) << std::endl;
  }
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
      LocalCluster::Start({workers, servers, "", log_dir, fabric.get(), options.tls, {},
                           spec.fabric().server_placement() == proto::ServerPlacement::colocated});
  UplinkMeter uplinks(fabric.get());
  if (!cluster.ok()) {
    std::cerr << "error: " << cluster.status().message() << "\n";
    return 1;
  }
  LocalCluster& c = **cluster;
  std::cerr << absl::StrCat("testbed local: ", c.Whereabouts(), "\n") << std::flush;

  // A daemon that dies on its own: give the coordinator time to name the lost
  // rank, then stop waiting for it.
  LostDaemonWatchdog watchdog(c, [&] { interrupter.CancelCurrent(); });
  const absl::Status status =
      SubmitAndRecord(options.experiment, spec,
                      {c.coordinator(), credentials, tls, /*wait_for_workers_s=*/30, deployment,
                       [&](proto::ResultRow& row) { uplinks.Annotate(row); }},
                      tuning, interrupter, sink);
  int code = ExitCode(status, interrupter);
  watchdog.Stop();
  if (code == 1) {
    // The workers of a failed experiment exit on their own, naming the lost
    // rank in their logs; let them, so their exits are reported, not our
    // kill - also when the coordinator's verdict came before any of them left.
    // They do so within moments of each other; a worker that has not one
    // second after the last exit is hung (or was never in the experiment: a
    // refused submission, a results file that filled up), and Stop() ends it.
    // Workers only are counted: a killed server's exit is no worker's.
    auto quiet_until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    std::size_t exited = c.ExitedWorkers();
    while (exited < c.worker_pids().size() && std::chrono::steady_clock::now() < quiet_until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (const std::size_t now = c.ExitedWorkers(); now > exited) {
        exited = now;
        quiet_until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      }
    }
  }
  const std::vector<std::string> exits = c.UnexpectedExits();
  c.Stop();
  cluster->reset();  // every daemon is gone before its namespace goes
  if (fabric) fabric->Destroy();
  for (const std::string& exit : exits) std::cerr << "testbed local: " << exit << "\n";
  if (code != 0 && !exits.empty() && code != kInterrupted) code = 1;
  return code;
}

}  // namespace

int RunLocalSpecs(const LocalOptions& options, const std::vector<proto::ExperimentSpec>& specs,
                  RowSink& sink) {
  const bool netns = std::any_of(specs.begin(), specs.end(), [](const proto::ExperimentSpec& s) {
    return s.network() == proto::Network::netns;
  });
  if (netns && geteuid() != 0) {
    std::cerr << "error: --network netns needs root (it creates network namespaces, links and "
                 "tc limits); run it as root, or leave out --network for loopback\n";
    return 2;
  }
  if (netns) {
    // Each node has one device besides lo, and shared memory between the
    // namespaces would bypass the links being measured: TCP over eth0 only.
    for (const auto& [name, value] :
         {std::pair{"UCX_TLS", "tcp"}, std::pair{"UCX_NET_DEVICES", NetnsFabric::kNodeDevice}}) {
      if (const char* set = std::getenv(name); set != nullptr && std::string(set) != value) {
        std::cerr << "testbed local: --network netns sets " << name << "=" << value
                  << " (was " << set << ")\n";
      }
      setenv(name, value, /*overwrite=*/1);
    }
  } else {
    // Loopback means loopback: without this UCX may pick any local interface
    // (a container bridge, say), which makes runs hard to compare.
    setenv("UCX_NET_DEVICES", "lo", /*overwrite=*/0);
  }
  // The daemons it starts listen with these, so they need a certificate.
  const absl::StatusOr<Tls> tls = LoadTls(options.tls, /*need_identity=*/true);
  if (!tls.ok()) {
    std::cerr << "error: " << tls.status().message() << "\n";
    return 2;
  }
  const absl::StatusOr<Tuning> tuning = ReadTuning(options.experiment);
  if (!tuning.ok()) {
    std::cerr << "error: " << tuning.status().message() << "\n";
    return 2;
  }
  // One job per run: the daemons inherit these, and nothing else can join.
  const Credentials credentials{absl::StrCat("local-", getpid()), RandomHex(16)};
  setenv("TESTBED_JOB_ID", credentials.job_id.c_str(), 1);
  setenv("TESTBED_TOKEN", credentials.token.c_str(), 1);

  const absl::StatusOr<LogFolder> logs = LogFolder::Open(options.log_dir, "testbed-local");
  if (!logs.ok()) {
    std::cerr << "error: " << logs.status().message() << "\n";
    return 1;
  }
  Interrupter interrupter;
  SignalWaiter waiter([&](int) { interrupter.Interrupt(); });
  int code = 0;
  for (const proto::ExperimentSpec& spec : specs) {
    if (specs.size() > 1) std::cerr << "testbed local: N = " << spec.workers() << std::endl;
    code = RunOneCluster(options, spec, credentials, *tls, logs->path(), *tuning, interrupter, sink);
    if (code != 0) break;
  }
  logs->Finish(code == 0, options.keep_logs, std::cerr, "testbed local");
  return code;
}

int RunLocal(const LocalOptions& options, const CLI::App& command) {
  absl::StatusOr<proto::ExperimentSpec> spec = BuildSpec(options.experiment, command);
  if (!spec.ok()) {
    std::cerr << "error: " << spec.status().message() << "\n";
    return 2;
  }
  if (!CanWriteResults(options.experiment.out)) return 2;
  // One cluster per N of a sweep.
  std::vector<proto::ExperimentSpec> specs;
  const std::vector<int> counts = WorkerCounts(*spec);
  for (int n : counts) {
    proto::ExperimentSpec& one = specs.emplace_back(*spec);
    one.set_workers(n);
    one.clear_worker_counts();
  }
  RowSink sink(options.experiment);
  int code = RunLocalSpecs(options, specs, sink);
  sink.PrintTable();
  if (!WriteTimelineIfAsked(options.experiment, *spec, sink,
                            absl::StrCat("testbed local, ", FabricSummary(spec->fabric()), ", ",
                                         EnumText(spec->network())),
                            std::cerr) &&
      code == 0) {
    code = 1;
  }
  if (code == 0 && !options.experiment.out.empty()) {
    std::cerr << "results appended to " << options.experiment.out << "\n";
    const std::string markdown = CourseTablePathFor(options.experiment.out);
    if (absl::Status st = WriteCourseTable(options.experiment.out, markdown); st.ok()) {
      std::cerr << "course table (every run in that file) written to " << markdown << "\n";
    } else {
      std::cerr << "warning: no course table: " << st.message() << "\n";
    }
  }
  return code;
}

}  // namespace testbed
