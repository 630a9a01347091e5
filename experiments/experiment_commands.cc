#include "experiments/experiment_commands.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>

#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "experiments/experiment_client.h"
#include "experiments/local_cluster.h"
#include "experiments/results_output.h"
#include "proto/spec.h"
#include "server/signal_waiter.h"

namespace testbed {
namespace fs = std::filesystem;

namespace {

constexpr int kInterrupted = 130;

std::string RandomHex(int bytes) {
  std::random_device random;
  std::string out;
  for (int i = 0; i < bytes; ++i) absl::StrAppend(&out, absl::Hex(random() & 0xff, absl::kZeroPad2));
  return out;
}

// Submits, prints and records; shared by local and run. Returns the exit code.
int SubmitAndReport(const ExperimentFlags& flags, const proto::ExperimentSpec& spec,
                    const std::string& coordinator, const Credentials& credentials,
                    int wait_for_workers_s, const std::string& deployment,
                    grpc::ClientContext& context, const std::atomic<bool>& interrupted) {
  ResultsFile results_file;
  if (!flags.out.empty()) {
    if (absl::Status st = results_file.Open(flags.out, spec, deployment); !st.ok()) {
      std::cerr << "error: " << st.message() << "\n";
      return 2;
    }
  }
  const OutputFormat format = *ParseOutputFormat(flags.format);
  Table table(ResultColumns());
  bool any_ps = false, any_wire = false;
  const absl::Status status = SubmitExperiment(
      coordinator, credentials, spec, wait_for_workers_s, context,
      [&](const proto::ResultRow& row) {
        table.AddRow(ResultCells(row));
        any_ps |= row.servers() > 0;
        any_wire |= row.wire_bytes_sent_size() > 0;
        if (results_file.is_open()) results_file.Append(row);
        if (format == OutputFormat::kJson) {
          std::cout << JsonObject(table.columns(), table.rows().back()) << std::endl;
        }
      },
      std::cerr);
  if (format == OutputFormat::kCsv && !table.rows().empty()) table.Print(format, std::cout);
  if (format == OutputFormat::kTable && !table.rows().empty()) {
    table.Select(TableColumns(any_ps, any_wire)).Print(format, std::cout);
  }
  if (interrupted) {
    std::cerr << "testbed: interrupted\n";
    return kInterrupted;
  }
  if (!status.ok()) {
    std::cerr << "error: experiment failed: " << status.message() << "\n";
    return 1;
  }
  if (!flags.out.empty()) std::cerr << "results appended to " << flags.out << "\n";
  return 0;
}

}  // namespace

CLI::App* AddLocalCommand(CLI::App& app, LocalOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "local",
      "Start a coordinator and N workers as child processes on loopback, run the sweep over "
      "UCX, print one row per (algorithm, size). Every process started is ended, also on "
      "failure and Ctrl-C. Choose UCX transports with UCX_TLS (e.g. UCX_TLS=tcp).");
  AddExperimentFlags(*cmd, options.experiment);
  cmd->add_option("--log-dir", options.log_dir,
                  "Folder for the daemons' logs (default: a new one under /tmp, removed after "
                  "a successful run)");
  cmd->add_flag("--keep-logs", options.keep_logs, "Keep the log folder after a successful run");
  cmd->footer(
      "Examples:\n"
      "  testbed local --workers 4 --algorithms naive,ring,tree,butterfly --sizes 4KiB:16MiB\n"
      "  UCX_TLS=tcp testbed local -n 4 -a ring -s 16MiB --iters 20 --out results.jsonl\n"
      "  testbed local --spec experiments/specs/quick.textproto --format json");
  return cmd;
}

CLI::App* AddRunCommand(CLI::App& app, RunOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Submit an experiment to a running coordinator (compose, several hosts) and print one row "
      "per (algorithm, size). TESTBED_JOB_ID and TESTBED_TOKEN must match the daemons'.");
  cmd->add_option("-c,--coordinator", options.coordinator, "The coordinator's HOST:PORT")
      ->required();
  cmd->add_option("--wait-for-workers", options.wait_for_workers_s,
                  "Seconds to wait for N workers to attach")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  AddExperimentFlags(*cmd, options.experiment);
  return cmd;
}

int RunLocal(const LocalOptions& options, const CLI::App& command) {
  absl::StatusOr<proto::ExperimentSpec> spec = BuildSpec(options.experiment, command);
  if (!spec.ok()) {
    std::cerr << "error: " << spec.status().message() << "\n";
    return 2;
  }
  // Loopback means loopback: without this UCX may pick any local interface
  // (a container bridge, say), which makes runs hard to compare.
  setenv("UCX_NET_DEVICES", "lo", /*overwrite=*/0);
  // One job per run: the daemons inherit these, and nothing else can join.
  const Credentials credentials{absl::StrCat("local-", getpid()), RandomHex(16)};
  setenv("TESTBED_JOB_ID", credentials.job_id.c_str(), 1);
  setenv("TESTBED_TOKEN", credentials.token.c_str(), 1);

  const bool own_logs = options.log_dir.empty();
  std::string log_dir = options.log_dir;
  if (own_logs) {
    std::string pattern = (fs::temp_directory_path() / "testbed-local-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::cerr << "error: cannot create a log folder under /tmp\n";
      return 1;
    }
    log_dir = pattern;
  } else {
    fs::create_directories(log_dir);
  }

  std::atomic<bool> interrupted{false};
  grpc::ClientContext context;
  SignalWaiter waiter([&](int) {
    interrupted = true;
    context.TryCancel();
  });

  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
      LocalCluster::Start({static_cast<int>(spec->workers()),
                           UsesParameterServer(*spec) ? static_cast<int>(spec->servers()) : 1, "",
                           log_dir});
  if (!cluster.ok()) {
    std::cerr << "error: " << cluster.status().message() << "\n";
    return 1;
  }
  LocalCluster& c = **cluster;
  std::cerr << "testbed local: testbed-server pids " << absl::StrJoin(c.server_pids(), " ")
            << " (coordinator on " << c.coordinator() << "); testbed-worker pids " << absl::StrJoin(c.worker_pids(), " ") << "; logs in "
            << log_dir << std::endl;

  // A daemon that dies on its own: give the coordinator time to name the lost
  // rank, then stop waiting for it.
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    std::chrono::steady_clock::time_point first_exit{};
    while (!finished) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (c.UnexpectedExits().empty()) continue;
      if (first_exit == std::chrono::steady_clock::time_point{}) {
        first_exit = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - first_exit > std::chrono::seconds(15)) {
        context.TryCancel();
        return;
      }
    }
  });

  int code = SubmitAndReport(options.experiment, *spec, c.coordinator(), credentials,
                             /*wait_for_workers_s=*/30, absl::StrCat("local, ", spec->workers(),
                                                                    " workers on loopback"),
                             context, interrupted);
  finished = true;
  watchdog.join();
  if (code == 1) {
    // The workers of a failed experiment exit on their own, naming the lost
    // rank in their logs; let them, so their exit is reported, not our kill.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (c.UnexpectedExits().size() < c.worker_pids().size() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  const std::vector<std::string> exits = c.UnexpectedExits();
  c.Stop();
  for (const std::string& exit : exits) std::cerr << "testbed local: " << exit << "\n";
  if (code != 0 && !exits.empty() && code != kInterrupted) code = 1;
  if (code == 0 && own_logs && !options.keep_logs) {
    fs::remove_all(log_dir);
  } else if (code != 0) {
    std::cerr << "testbed local: the daemons' logs are in " << log_dir << "\n";
  }
  return code;
}

int RunRun(const RunOptions& options, const CLI::App& command) {
  absl::StatusOr<proto::ExperimentSpec> spec = BuildSpec(options.experiment, command);
  if (!spec.ok()) {
    std::cerr << "error: " << spec.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<Credentials> credentials = CredentialsFromEnvironment();
  if (!credentials.ok()) {
    std::cerr << "error: " << credentials.status().message() << "\n";
    return 2;
  }
  std::atomic<bool> interrupted{false};
  grpc::ClientContext context;
  SignalWaiter waiter([&](int) {
    interrupted = true;
    context.TryCancel();
  });
  return SubmitAndReport(options.experiment, *spec, options.coordinator, *credentials,
                         options.wait_for_workers_s,
                         absl::StrCat("daemons at ", options.coordinator), context, interrupted);
}

}  // namespace testbed
