// `testbed local`'s deployment: S testbed-server and N testbed-worker daemons
// started as child processes - the same daemons a compose deployment runs,
// without containers - either all on loopback, or each in its own node of an
// emulated cluster (NetnsFabric: servers are nodes 0..S-1, workers S..S+N-1;
// colocated, server s and worker s share node s).
//
// Every process it starts it ends, by PID: in Stop(), in the destructor, and -
// through PR_SET_PDEATHSIG - even when the harness itself is killed.
//
// Thread-safety: Start/Stop from one thread; UnexpectedExits() from any.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/cluster/netns_fabric.h"
#include "proto/tls.h"

namespace testbed {

struct LocalClusterOptions {
  int workers = 4;      // 0: servers only (`testbed train`'s parameter server)
  int servers = 1;      // the first is the coordinator; the others join it as shards
  std::string bin_dir;  // where testbed-server and testbed-worker are
  std::string log_dir;  // one log file per daemon
  const NetnsFabric* fabric = nullptr;  // null: loopback; else its nodes (servers + workers)
  TlsFlags tls;  // passed on to every daemon; none: plaintext
  // Environment for the daemons (job id, token, UCX_TLS...) is inherited,
  // with these NAME=VALUE pairs set on top: a caller that must not change its
  // own environment (threads may read it) hands the job's credentials here.
  std::vector<std::pair<std::string, std::string>> environment = {};
  // In the fabric, server s in worker s's node (servers <= workers), not a node
  // of its own: BytePS's colocated servers (proto/fabric.proto).
  bool colocated_servers = false;
};

class LocalCluster {
 public:
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& options);
  ~LocalCluster();

  const std::string& coordinator() const { return coordinator_; }  // HOST:PORT
  pid_t server_pid() const { return children_[0].pid; }
  std::vector<pid_t> worker_pids() const;
  std::vector<pid_t> server_pids() const;  // the coordinator first
  // The one line a person (or a test) reads to find the daemons: "testbed-server
  // pids A B (coordinator on H:P); testbed-worker pids X Y Z; logs in DIR".
  // Printed whole, in one write, so a reader never sees half of it.
  std::string Whereabouts() const;

  // Where each parameter-server shard serves (HOST:PORT), the coordinator's
  // first, once every shard has joined the coordinator and listens; fails
  // naming the daemon's log when one does not within `timeout`.
  absl::StatusOr<std::vector<std::string>> WaitForShards(std::chrono::seconds timeout) const;

  // Daemons that ended on their own so far, described ("testbed-worker 2
  // (pid 123) was killed by signal 9").
  std::vector<std::string> UnexpectedExits() const;
  // How many of the workers (servers not counted) have ended on their own.
  std::size_t ExitedWorkers() const;

  // SIGTERM to every daemon still running, SIGKILL to those alive 5 s later,
  // all reaped. Idempotent.
  void Stop();

 private:
  struct Child {
    std::string name;  // "testbed-server", "testbed-worker 2"
    pid_t pid = -1;
    std::string log;
    bool exited = false;  // guarded by mu_
    int status = 0;       // waitpid status once exited
  };

  LocalCluster() = default;
  absl::Status Spawn(const std::string& name, const std::vector<std::string>& argv,
                     const std::string& log);
  void Reap(bool block);  // collects exits; guarded by mu_ inside

  std::vector<Child> children_;  // servers first ([0] the coordinator), then workers
  std::vector<std::string> environment_;  // NAME=VALUE, what every daemon runs with
  std::vector<std::string> shard_port_files_;  // by shard; [0] the coordinator's
  std::vector<std::string> shard_hosts_;       // by shard: where each listens
  int servers_ = 1;
  std::string coordinator_;
  std::string log_dir_;
  mutable std::mutex mu_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> done_{false};
  std::thread reaper_;
};

// Where the daemons are: $TESTBED_BIN_DIR, else beside this executable, else
// the build tree's ../server and ../worker.
std::string FindDaemon(const std::string& name);

}  // namespace testbed
