#include "experiments/cluster/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

extern char** environ;

namespace testbed {
namespace fs = std::filesystem;

namespace {

std::string DescribeExit(const std::string& name, pid_t pid, int status) {
  if (WIFSIGNALED(status)) {
    return absl::StrCat(name, " (pid ", pid, ") was killed by signal ", WTERMSIG(status));
  }
  return absl::StrCat(name, " (pid ", pid, ") exited with status ", WEXITSTATUS(status));
}

// This process's environment with `overrides` (NAME, VALUE) set on top, as
// NAME=VALUE strings: built before fork, since a forked child of a threaded
// process may only call async-signal-safe functions until it execs.
std::vector<std::string> DaemonEnvironment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::string_view name = text.substr(0, text.find('='));
    bool overridden = false;
    for (const auto& [override_name, value] : overrides) overridden |= name == override_name;
    if (!overridden) entries.emplace_back(text);
  }
  for (const auto& [name, value] : overrides) entries.push_back(absl::StrCat(name, "=", value));
  return entries;
}

// The port a daemon wrote to `port_file` once it listened; 0 while none.
int ReadPort(const std::string& port_file) {
  int port = 0;
  std::ifstream(port_file) >> port;
  return port;
}

}  // namespace

std::string FindDaemon(const std::string& name) {
  if (const char* dir = std::getenv("TESTBED_BIN_DIR"); dir != nullptr && *dir) {
    return (fs::path(dir) / name).string();
  }
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error).parent_path();
  const std::string folder = name == "testbed-server" ? "server" : "worker";
  for (const fs::path& candidate : {self / name, self / ".." / folder / name}) {
    if (fs::exists(candidate)) return fs::weakly_canonical(candidate).string();
  }
  return name;  // left to PATH
}

absl::Status LocalCluster::Spawn(const std::string& name, const std::vector<std::string>& argv,
                                 const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  for (const std::string& e : environment_) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return absl::PermissionDeniedError(absl::StrCat("cannot write ", log));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // The child: die with the harness, take its signals normally, log to a file.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // the harness died before prctl
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    const int null_fd = open("/dev/null", O_RDONLY);
    dup2(null_fd, STDIN_FILENO);
    execvpe(args[0], args.data(), env.data());
    dprintf(STDERR_FILENO, "cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(log_fd);
  std::lock_guard lock(mu_);
  children_.push_back(Child{name, pid, log});
  return absl::OkStatus();
}

void LocalCluster::Reap(bool block) {
  std::lock_guard lock(mu_);
  for (Child& child : children_) {
    if (child.exited) continue;
    int status = 0;
    if (waitpid(child.pid, &status, block ? 0 : WNOHANG) == child.pid) {
      child.exited = true;
      child.status = status;
    }
  }
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const LocalClusterOptions& options) {
  std::unique_ptr<LocalCluster> cluster(new LocalCluster());
  cluster->environment_ = DaemonEnvironment(options.environment);
  const std::string server = FindDaemon("testbed-server");
  const std::string worker = FindDaemon("testbed-worker");
  std::vector<std::string> binaries{server};
  if (options.workers > 0) binaries.push_back(worker);
  for (const std::string& binary : binaries) {
    if (access(binary.c_str(), X_OK) != 0) {
      return absl::NotFoundError(absl::StrCat("cannot find ", binary,
                                              " (build it, or set TESTBED_BIN_DIR)"));
    }
  }
  const int worker_node0 = options.colocated_servers ? 0 : options.servers;
  if (options.fabric != nullptr &&
      (options.fabric->nodes() < worker_node0 + options.workers ||
       options.fabric->nodes() < options.servers)) {
    return absl::InvalidArgumentError("the emulated cluster has too few nodes");
  }
  // Where daemon `node` runs and listens: loopback, or its own namespace.
  const std::vector<std::string> tls_args = options.tls.AsArgs();
  const auto placed = [&](int node, std::vector<std::string> argv) {
    argv.insert(argv.end(), tls_args.begin(), tls_args.end());
    if (options.fabric == nullptr) return argv;
    std::vector<std::string> full = options.fabric->ExecPrefix(node);
    full.insert(full.end(), argv.begin(), argv.end());
    return full;
  };
  const auto host_of = [&](int node) -> std::string {
    return options.fabric == nullptr ? "127.0.0.1" : options.fabric->address_of(node);
  };
  const std::string port_file = (fs::path(options.log_dir) / "server.port").string();
  fs::remove(port_file);
  cluster->shard_port_files_.push_back(port_file);
  cluster->shard_hosts_.push_back(host_of(0));
  if (absl::Status st = cluster->Spawn(
          "testbed-server",
          placed(0, {server, "--listen", host_of(0) + ":0", "--port-file", port_file}),
          (fs::path(options.log_dir) / "server.log").string());
      !st.ok()) {
    return st;
  }
  cluster->reaper_ = std::thread([c = cluster.get()] {
    while (!c->done_) {
      c->Reap(/*block=*/false);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  // The server writes its port once it listens.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int port = 0;
  while (port == 0) {
    port = ReadPort(port_file);
    if (port != 0) break;
    if (!cluster->UnexpectedExits().empty() || std::chrono::steady_clock::now() > deadline) {
      return absl::UnavailableError(absl::StrCat(
          "testbed-server did not start; see ", (fs::path(options.log_dir) / "server.log").string()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  cluster->coordinator_ = absl::StrCat(host_of(0), ":", port);
  cluster->log_dir_ = options.log_dir;
  cluster->servers_ = options.servers;
  for (int s = 1; s < options.servers; ++s) {
    // A shard writes its port once it has joined the coordinator (WaitForShards).
    const std::string shard_port_file =
        (fs::path(options.log_dir) / absl::StrCat("server-", s, ".port")).string();
    fs::remove(shard_port_file);
    cluster->shard_port_files_.push_back(shard_port_file);
    cluster->shard_hosts_.push_back(host_of(s));
    if (absl::Status st = cluster->Spawn(
            absl::StrCat("testbed-server ", s),
            placed(s, {server, "--listen", host_of(s) + ":0", "--join", cluster->coordinator_,
                       "--join-timeout", "30", "--port-file", shard_port_file}),
            (fs::path(options.log_dir) / absl::StrCat("server-", s, ".log")).string());
        !st.ok()) {
      return st;
    }
  }
  for (int i = 0; i < options.workers; ++i) {
    if (absl::Status st = cluster->Spawn(
            absl::StrCat("testbed-worker ", i),
            placed(worker_node0 + i,
                   {worker, "--coordinator", cluster->coordinator_, "--connect-timeout", "30",
                    "--worker-id", std::to_string(i)}),
            (fs::path(options.log_dir) / absl::StrCat("worker-", i, ".log")).string());
        !st.ok()) {
      return st;
    }
  }
  return cluster;
}

std::vector<pid_t> LocalCluster::worker_pids() const {
  std::lock_guard lock(mu_);
  std::vector<pid_t> pids;
  for (std::size_t i = servers_; i < children_.size(); ++i) pids.push_back(children_[i].pid);
  return pids;
}

std::string LocalCluster::Whereabouts() const {
  return absl::StrCat("testbed-server pids ", absl::StrJoin(server_pids(), " "),
                      " (coordinator on ", coordinator_, "); testbed-worker pids ",
                      absl::StrJoin(worker_pids(), " "), "; logs in ", log_dir_);
}

std::vector<pid_t> LocalCluster::server_pids() const {
  std::lock_guard lock(mu_);
  std::vector<pid_t> pids;
  for (int i = 0; i < servers_ && i < static_cast<int>(children_.size()); ++i) {
    pids.push_back(children_[i].pid);
  }
  return pids;
}

absl::StatusOr<std::vector<std::string>> LocalCluster::WaitForShards(
    std::chrono::seconds timeout) const {
  std::vector<std::string> addresses{coordinator_};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (std::size_t s = 1; s < shard_port_files_.size(); ++s) {
    int port = 0;
    while ((port = ReadPort(shard_port_files_[s])) == 0) {
      if (!UnexpectedExits().empty() || std::chrono::steady_clock::now() > deadline) {
        std::lock_guard lock(mu_);
        return absl::UnavailableError(absl::StrCat(children_[s].name,
                                                   " did not join the coordinator; see ",
                                                   children_[s].log));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    addresses.push_back(absl::StrCat(shard_hosts_[s], ":", port));
  }
  return addresses;
}

std::size_t LocalCluster::ExitedWorkers() const {
  std::lock_guard lock(mu_);
  if (stopping_) return 0;
  std::size_t exited = 0;
  for (std::size_t i = servers_; i < children_.size(); ++i) exited += children_[i].exited;
  return exited;
}

std::vector<std::string> LocalCluster::UnexpectedExits() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> exits;
  if (stopping_) return exits;
  for (const Child& child : children_) {
    if (child.exited) exits.push_back(DescribeExit(child.name, child.pid, child.status));
  }
  return exits;
}

void LocalCluster::Stop() {
  if (stopping_.exchange(true)) return;
  const auto signal_all = [&](int signal) {
    std::lock_guard lock(mu_);
    for (const Child& child : children_) {
      if (!child.exited) kill(child.pid, signal);
    }
  };
  const auto all_exited = [&] {
    std::lock_guard lock(mu_);
    for (const Child& child : children_) {
      if (!child.exited) return false;
    }
    return true;
  };
  signal_all(SIGTERM);
  // A stopped (hung) daemon would hold its SIGTERM until the SIGKILL below:
  // wake it so it ends as cleanly as the others.
  signal_all(SIGCONT);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!all_exited() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  signal_all(SIGKILL);
  done_ = true;
  if (reaper_.joinable()) reaper_.join();
  Reap(/*block=*/true);
}

LocalCluster::~LocalCluster() { Stop(); }

}  // namespace testbed
