// The coordinator's state, with no gRPC in it: the attached workers, the
// parameter-server shards, and at most one experiment, which moves through
//
//   kIdle -> kWaitingForWorkers -> kPreparing -> kConnecting -> kRunning
//         -> kCollecting -> kDone            (and from any of them: kFailed)
//
//   waiting for workers: submitted; N workers (and S shards) not yet there.
//   preparing:  ranks given (Prepare sent); waiting for every UCX address.
//   connecting: addresses relayed (Connect sent); waiting for every Ready.
//   running:    Start sent; waiting for each row's N results, in spec order.
//               A training run (SubmitTraining) instead relays rank 0's
//               TrainingRows as they come, until every rank's Finished.
//   collecting: every row aggregated; waiting for every rank's Finished.
//   done, failed: terminal until Release(), which returns to kIdle.
//
// Every event is a method; time comes in as `now`, so tests need no clock and
// no sleeps. An event that makes no sense in the state (an address while
// running, a message from a worker with no rank) is refused with an error and
// changes nothing. Messages for workers and rows for the client are queued
// (TakeMessages, TakeRows); the caller delivers them. A failure is one
// absl::Status: the first wins, and each rank is sent an Abort with its text.
//
// Thread-safety: none; the gRPC service calls it under its own mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/control.pb.h"
#include "proto/experiment.pb.h"
#include "proto/training.pb.h"

namespace testbed {

using CoordinatorClock = std::chrono::steady_clock;

// When the coordinator gives up on one row (an algorithm at a size) that
// started at `now`: every iteration, warm-up included, may take the spec's
// collective timeout, plus 30 s of slack. Saturates at the clock's last
// instant instead of overflowing: timeout x iterations can pass the ~292 years
// that steady_clock's nanoseconds hold (86400 s x 1000000 iterations does).
CoordinatorClock::time_point RowDeadline(CoordinatorClock::time_point now,
                                         const proto::ExperimentSpec& spec);
// When the coordinator gives up on a training run started at `now`: each step
// may take the spec's timeout (120 s where it gives none), plus one for the
// evaluations and 30 s of slack; no deadline for a run given in epochs, whose
// steps depend on the workers' data (heartbeats still catch a hung rank).
CoordinatorClock::time_point TrainingDeadline(CoordinatorClock::time_point now,
                                              const proto::TrainingSpec& spec);

enum class ExperimentState {
  kIdle,               // no experiment
  kWaitingForWorkers,  // submitted, not enough workers or shards yet
  kPreparing,          // Prepare sent; waiting for every rank's UCX address
  kConnecting,         // Connect sent; waiting for every rank's Ready
  kRunning,            // Start sent; waiting for the rows' results
  kCollecting,         // every row is in; waiting for every rank's Finished
  kDone,
  kFailed,
};
absl::string_view StateName(ExperimentState state);

struct CoordinatorTimeouts {
  std::chrono::milliseconds heartbeat_interval{1000};  // asked of workers
  std::chrono::milliseconds heartbeat_timeout{10000};  // silence that means lost
  std::chrono::milliseconds handshake_timeout{30000};  // addresses, connections, finish
  // How long a worker's own failure report is held back: if the rank at fault
  // is lost to the control plane meanwhile, the failure names it first. A
  // dead process's control stream breaks within milliseconds of its UCX
  // endpoints, so half a second covers it without delaying a hung rank's
  // verdict (the run must end within its timeout + 3 s).
  std::chrono::milliseconds report_hold_back{500};
};

class CoordinatorCore {
 public:
  using Time = CoordinatorClock::time_point;

  struct Outgoing {  // a message for one worker
    std::uint32_t worker_id = 0;
    proto::CoordinatorMessage message;
  };
  struct Row {  // a finished row for the client, with its line for people
    proto::ResultRow row;
    std::string note;
  };

  explicit CoordinatorCore(CoordinatorTimeouts timeouts = {});

  // --- Workers and shards -------------------------------------------------
  // An id for a worker about to attach: `requested` when no attached (or
  // reserved) worker has it, else the lowest free one; refused once shutting
  // down. It stays taken until WorkerLost(id).
  absl::StatusOr<std::uint32_t> ReserveWorkerId(
      std::optional<std::uint32_t> requested = std::nullopt);
  // The worker (welcomed under `id`) counts from now on; may start the waiting
  // experiment.
  void WorkerAttached(std::uint32_t id, std::string host, std::uint32_t pid, Time now);
  // Its control stream closed. A rank of the experiment that had not reported
  // a failure fails it, named; an idle worker just stops counting.
  void WorkerLost(std::uint32_t id);
  // This server's own shard (shard 0); known once the server listens.
  void SetOwnShardAddress(std::string address);
  // Another server's shard offered itself; returns its shard id (1, 2, ...),
  // the same one again for the same address. May start the waiting experiment.
  std::uint32_t ShardJoined(const std::string& address, Time now);

  // --- Experiment ---------------------------------------------------------
  // Takes the experiment (defaults applied, validated) and waits for workers
  // until now + wait_for_workers. Refused while another experiment exists.
  absl::StatusOr<std::uint64_t> Submit(proto::ExperimentSpec spec,
                                       std::chrono::seconds wait_for_workers, Time now);
  // A training run on N workers (and, for ps, S shards): every rank is told
  // the spec in its Prepare; the names in it are checked by the workers, which
  // report a bad one as their failure. Refused with sweep axes (one run per
  // submission) and, like Submit, while another experiment exists.
  absl::StatusOr<std::uint64_t> SubmitTraining(proto::TrainingSpec spec,
                                               std::chrono::seconds wait_for_workers, Time now);

  // Any message from a worker: heartbeats and all the ones below.
  absl::Status Deliver(std::uint32_t worker_id, const proto::WorkerMessage& message, Time now);
  void Heartbeat(std::uint32_t worker_id, Time now);
  absl::Status AddressReceived(std::uint32_t worker_id, std::string address, Time now);
  absl::Status ReadyReceived(std::uint32_t worker_id, Time now);
  absl::Status ResultReceived(std::uint32_t worker_id, const proto::RankResult& result, Time now);
  absl::Status FailureReported(std::uint32_t worker_id, absl::string_view message, Time now);
  absl::Status FinishedReceived(std::uint32_t worker_id, Time now);
  absl::Status TrainingRowReceived(std::uint32_t worker_id, const proto::TrainingRow& row,
                                   Time now);

  // Deadlines: the wait for workers, each handshake, each row, heartbeats, a
  // held-back failure report. Call whenever time has passed.
  void CheckDeadlines(Time now);
  // The client that submitted went away; the coordinator shuts down.
  void ClientGone();
  void Shutdown();

  // In kDone or kFailed: the outcome, and back to kIdle (workers idle again).
  absl::Status Release();

  // --- Reading ------------------------------------------------------------
  ExperimentState state() const { return state_; }
  std::uint64_t experiment_id() const { return experiment_ ? experiment_->id : 0; }
  const absl::Status& failure() const;  // OK unless kFailed
  std::size_t workers_attached() const { return workers_.size(); }
  std::size_t shards() const { return shards_.size() + 1; }  // this server's included
  // An experiment holds workers (from kPreparing until Release).
  bool experiment_running() const;
  // "1 of 2 workers attached[, 1 of 2 parameter-server shards]".
  std::string WaitingFor() const;
  // The rank a worker has in the experiment; nullopt when it has none.
  std::optional<int> RankOf(std::uint32_t worker_id) const;

  bool has_queued() const {
    return !outbox_.empty() || !rows_.empty() || !training_rows_.empty();
  }
  std::vector<Outgoing> TakeMessages() { return std::exchange(outbox_, {}); }
  std::vector<Row> TakeRows() { return std::exchange(rows_, {}); }
  std::vector<proto::TrainingRow> TakeTrainingRows() { return std::exchange(training_rows_, {}); }

 private:
  struct Worker {
    std::string host;
    std::uint32_t pid = 0;
  };
  struct Rank {
    std::uint32_t worker_id = 0;
    std::string name;  // "rank 2 (worker 5 (host pid 123))"
    Time last_seen;
    std::string address;  // empty until reported
    bool ready = false, finished = false, reported_failure = false;
  };
  struct Experiment {
    std::uint64_t id = 0;
    proto::ExperimentSpec spec;
    std::optional<proto::TrainingSpec> training;  // a training run, instead of `spec`
    std::uint32_t workers = 0, servers = 0;  // N, and S for ps: the spec's or the training's
    bool ps = false;  // runs on the parameter server: needs its shards
    std::chrono::seconds wait_for_workers{0};
    std::vector<Rank> ranks;
    std::map<std::uint32_t, int> rank_of;  // worker id -> rank
    Time deadline;         // of the current state's wait
    std::string awaiting;  // what that wait is for, in "timed out waiting for ..."
    int next_row = 0;      // index into algorithms x sizes, in spec order
    int timed_row = -1;    // the row `deadline` is for
    std::map<std::pair<std::string, std::int64_t>, std::vector<proto::RankResult>> results;
    // A worker's own report of a failure ("lost connection to rank 3"), held
    // back: see CoordinatorTimeouts::report_hold_back.
    std::string peer_report;
    Time peer_report_at;
    absl::Status failure;
  };

  bool Active() const;  // kPreparing .. kCollecting
  // The rank of `worker_id` if the experiment is in one of `states`;
  // otherwise an error saying why the event makes no sense now.
  absl::StatusOr<Rank*> RankFor(std::uint32_t worker_id, absl::string_view event,
                                std::initializer_list<ExperimentState> states);
  // Whether a submission may begin now: not while shutting down, and one
  // experiment or training run at a time.
  absl::Status CanBegin() const;
  // Takes the experiment, then waits for its workers.
  absl::StatusOr<std::uint64_t> Begin(Experiment experiment, Time now);
  void MaybeStart(Time now);
  void Enter(ExperimentState state, Time deadline, std::string awaiting);
  void AdvanceRows(Time now);
  void Fail(absl::Status status);
  void SendToAll(const proto::CoordinatorMessage& message);

  const CoordinatorTimeouts timeouts_;
  ExperimentState state_ = ExperimentState::kIdle;
  std::optional<Experiment> experiment_;
  std::map<std::uint32_t, Worker> workers_;  // attached, by id
  std::string own_shard_address_;
  std::vector<std::string> shards_;  // other servers' shard addresses, in joining order
  std::set<std::uint32_t> taken_worker_ids_;  // reserved or attached
  std::uint64_t next_experiment_id_ = 1;
  bool shutting_down_ = false;
  std::vector<Outgoing> outbox_;
  std::vector<Row> rows_;
  std::vector<proto::TrainingRow> training_rows_;
};

}  // namespace testbed
