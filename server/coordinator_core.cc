#include "server/coordinator_core.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/byte_size.h"
#include "proto/spec.h"
#include "proto/training_spec.h"
#include "proto/result_aggregator.h"
#include "allreduce/collective.h"

namespace testbed {

using Clock = CoordinatorClock;

Clock::time_point RowDeadline(Clock::time_point now, const proto::ExperimentSpec& spec) {
  // Generous: every iteration may take the collective timeout, plus slack.
  // In 64-bit seconds, each factor below 2^33: no step here can overflow.
  constexpr std::int64_t kSlack_s = 30;
  const std::int64_t timeout_s = spec.timeout_s();
  const std::int64_t collectives =
      std::int64_t{spec.iterations()} + std::int64_t{spec.warmup()} + 1;
  const std::int64_t left_s =
      std::chrono::duration_cast<std::chrono::seconds>(Clock::time_point::max() - now).count();
  if (left_s <= kSlack_s || timeout_s > (left_s - kSlack_s) / collectives) {
    return Clock::time_point::max();
  }
  return now + std::chrono::seconds(timeout_s * collectives + kSlack_s);
}

Clock::time_point TrainingDeadline(Clock::time_point now, const proto::TrainingSpec& spec) {
  constexpr std::int64_t kSlack_s = 30;
  if (spec.steps() == 0) return Clock::time_point::max();
  const std::int64_t timeout_s = spec.timeout_s() ? spec.timeout_s() : 120;
  const std::int64_t left_s =
      std::chrono::duration_cast<std::chrono::seconds>(Clock::time_point::max() - now).count();
  // steps < 2^64 and timeout_s < 2^32: compare in division, never multiply past.
  const std::uint64_t budget_s = static_cast<std::uint64_t>(std::max<std::int64_t>(left_s - kSlack_s, 0));
  if (spec.steps() >= budget_s / static_cast<std::uint64_t>(timeout_s)) return Clock::time_point::max();
  return now + std::chrono::seconds(timeout_s * static_cast<std::int64_t>(spec.steps() + 1) + kSlack_s);
}

absl::string_view StateName(ExperimentState state) {
  switch (state) {
    case ExperimentState::kIdle: return "idle";
    case ExperimentState::kWaitingForWorkers: return "waiting for workers";
    case ExperimentState::kPreparing: return "preparing";
    case ExperimentState::kConnecting: return "connecting";
    case ExperimentState::kRunning: return "running";
    case ExperimentState::kCollecting: return "collecting";
    case ExperimentState::kDone: return "done";
    case ExperimentState::kFailed: return "failed";
  }
  return "?";
}

namespace {

std::int64_t Seconds(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::seconds>(d).count();
}

}  // namespace

CoordinatorCore::CoordinatorCore(CoordinatorTimeouts timeouts) : timeouts_(timeouts) {}

bool CoordinatorCore::Active() const {
  return state_ == ExperimentState::kPreparing || state_ == ExperimentState::kConnecting ||
         state_ == ExperimentState::kRunning || state_ == ExperimentState::kCollecting;
}

bool CoordinatorCore::experiment_running() const {
  return experiment_ && state_ != ExperimentState::kWaitingForWorkers;
}

const absl::Status& CoordinatorCore::failure() const {
  static const absl::Status kOk;
  return experiment_ ? experiment_->failure : kOk;
}

std::optional<int> CoordinatorCore::RankOf(std::uint32_t worker_id) const {
  if (!experiment_) return std::nullopt;
  const auto it = experiment_->rank_of.find(worker_id);
  if (it == experiment_->rank_of.end()) return std::nullopt;
  return it->second;
}

// --- Workers and shards ---------------------------------------------------

absl::StatusOr<std::uint32_t> CoordinatorCore::ReserveWorkerId(
    std::optional<std::uint32_t> requested) {
  if (shutting_down_) return absl::UnavailableError("shutting down");
  std::uint32_t id = 0;
  if (requested && !taken_worker_ids_.contains(*requested)) {
    id = *requested;
  } else {
    while (taken_worker_ids_.contains(id)) ++id;
  }
  taken_worker_ids_.insert(id);
  return id;
}

void CoordinatorCore::WorkerAttached(std::uint32_t id, std::string host, std::uint32_t pid,
                                     Time now) {
  workers_[id] = Worker{std::move(host), pid};
  MaybeStart(now);
}

void CoordinatorCore::WorkerLost(std::uint32_t id) {
  workers_.erase(id);
  taken_worker_ids_.erase(id);
  if (!Active()) return;
  const std::optional<int> rank = RankOf(id);
  if (!rank) return;
  // A worker that reported its failure leaves as it said it would; one that
  // just vanishes is the lost one.
  const Rank& lost = experiment_->ranks[*rank];
  if (lost.reported_failure) return;
  const std::string& report = experiment_->peer_report;
  Fail(absl::AbortedError(absl::StrCat(
      "lost ", lost.name, ": its control stream closed (process died or network failed)",
      report.empty() ? "" : "; ", report)));
}

void CoordinatorCore::SetOwnShardAddress(std::string address) {
  own_shard_address_ = std::move(address);
}

std::uint32_t CoordinatorCore::ShardJoined(const std::string& address, Time now) {
  auto it = std::find(shards_.begin(), shards_.end(), address);
  if (it == shards_.end()) {
    shards_.push_back(address);
    it = shards_.end() - 1;
    spdlog::info("parameter-server shard {} joined at {}", shards_.size(), address);
  }
  const auto id = static_cast<std::uint32_t>(it - shards_.begin()) + 1;
  MaybeStart(now);
  return id;
}

// --- Experiment -----------------------------------------------------------

absl::Status CoordinatorCore::CanBegin() const {
  if (shutting_down_) return absl::UnavailableError("the coordinator is shutting down");
  // One experiment at a time, counting the one still waiting for its workers:
  // two waiting at once would both start on the same workers when they came.
  if (state_ == ExperimentState::kWaitingForWorkers) {
    return absl::FailedPreconditionError(
        absl::StrCat("experiment ", experiment_->id,
                     " is waiting for workers; submit again when it has finished"));
  }
  if (state_ != ExperimentState::kIdle) {
    return absl::FailedPreconditionError(
        absl::StrCat("experiment ", experiment_->id, " is still running"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::uint64_t> CoordinatorCore::Submit(proto::ExperimentSpec spec,
                                                      std::chrono::seconds wait_for_workers,
                                                      Time now) {
  ApplyDefaults(spec);
  if (absl::Status st = ValidateSpec(spec); !st.ok()) return absl::InvalidArgumentError(st.message());
  if (absl::Status st = CanBegin(); !st.ok()) return st;
  Experiment e;
  e.ps = UsesParameterServer(spec);
  e.workers = spec.workers();
  e.servers = spec.servers();
  e.spec = std::move(spec);
  e.wait_for_workers = wait_for_workers;
  return Begin(std::move(e), now);
}

absl::StatusOr<std::uint64_t> CoordinatorCore::SubmitTraining(
    proto::TrainingSpec spec, std::chrono::seconds wait_for_workers, Time now) {
  if (HasSweepAxes(spec)) {
    return absl::InvalidArgumentError(
        "a training spec with sweep axes (worker_counts, link_rates, models, schemes) is many "
        "runs: testbed train submits them one by one");
  }
  ApplyRunDefaults(spec);
  if (absl::Status st = CheckRunLimits(spec); !st.ok()) return st;
  if (absl::Status st = CanBegin(); !st.ok()) return st;
  Experiment e;
  e.ps = RunsOnParameterServer(spec.sync());
  e.workers = spec.workers();
  e.servers = e.ps ? spec.servers() : 1;
  e.training = std::move(spec);
  e.wait_for_workers = wait_for_workers;
  return Begin(std::move(e), now);
}

absl::StatusOr<std::uint64_t> CoordinatorCore::Begin(Experiment experiment, Time now) {
  if (experiment.ps && own_shard_address_.empty()) {
    return absl::FailedPreconditionError(
        "this coordinator has no parameter-server address (--advertise)");
  }
  experiment_.emplace(std::move(experiment));
  experiment_->id = next_experiment_id_++;
  Enter(ExperimentState::kWaitingForWorkers, now + experiment_->wait_for_workers, "workers");
  MaybeStart(now);
  return experiment_->id;
}

std::string CoordinatorCore::WaitingFor() const {
  if (!experiment_) return "";
  return absl::StrCat(workers_.size(), " of ", experiment_->workers, " workers attached",
                      experiment_->ps ? absl::StrCat(", ", shards(), " of ", experiment_->servers,
                                                     " parameter-server shards")
                                      : "");
}

void CoordinatorCore::Enter(ExperimentState state, Time deadline, std::string awaiting) {
  state_ = state;
  experiment_->deadline = deadline;
  experiment_->awaiting = std::move(awaiting);
}

// kWaitingForWorkers -> kPreparing, once N workers and the shards are there.
void CoordinatorCore::MaybeStart(Time now) {
  if (state_ != ExperimentState::kWaitingForWorkers) return;
  Experiment& e = *experiment_;
  if (workers_.size() < e.workers || (e.ps && shards() < e.servers)) return;

  for (const auto& [id, worker] : workers_) {
    if (e.ranks.size() == e.workers) break;
    const int r = static_cast<int>(e.ranks.size());
    e.rank_of[id] = r;
    Rank& rank = e.ranks.emplace_back();
    rank.worker_id = id;
    rank.name = absl::StrCat("rank ", r, " (worker ", id, " (", worker.host, " pid ", worker.pid, "))");
    rank.last_seen = now;
  }
  if (e.training) {
    spdlog::info("experiment {}: training, {} workers, sync {}", e.id, e.workers,
                 e.training->sync());
  } else {
    spdlog::info("experiment {}: {} workers, {} algorithms x {} sizes", e.id, e.workers,
                 e.spec.algorithms_size(), e.spec.sizes_size());
  }
  const int n = static_cast<int>(e.workers);
  for (int r = 0; r < n; ++r) {
    Outgoing out;
    out.worker_id = e.ranks[r].worker_id;
    proto::Prepare& prepare = *out.message.mutable_prepare();
    prepare.set_experiment_id(e.id);
    prepare.set_rank(r);
    prepare.set_world_size(n);
    if (e.training) {
      *prepare.mutable_training() = *e.training;
    } else {
      *prepare.mutable_spec() = e.spec;
    }
    if (e.ps) {
      prepare.add_shard_addresses(own_shard_address_);
      for (std::uint32_t s = 0; s + 1 < e.servers; ++s) prepare.add_shard_addresses(shards_[s]);
    }
    outbox_.push_back(std::move(out));
  }
  Enter(ExperimentState::kPreparing, now + timeouts_.handshake_timeout, "UCX addresses");
}

absl::StatusOr<CoordinatorCore::Rank*> CoordinatorCore::RankFor(
    std::uint32_t worker_id, absl::string_view event,
    std::initializer_list<ExperimentState> states) {
  const std::optional<int> rank = RankOf(worker_id);
  if (!rank || !(Active() || state_ == ExperimentState::kDone || state_ == ExperimentState::kFailed)) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker_id, " sent ", event, " for no running experiment"));
  }
  if (std::find(states.begin(), states.end(), state_) == states.end()) {
    return absl::FailedPreconditionError(absl::StrCat(experiment_->ranks[*rank].name, " sent ",
                                                      event, " while experiment ",
                                                      experiment_->id, " is ",
                                                      StateName(state_)));
  }
  return &experiment_->ranks[*rank];
}

absl::Status CoordinatorCore::Deliver(std::uint32_t worker_id, const proto::WorkerMessage& message,
                                      Time now) {
  Heartbeat(worker_id, now);
  switch (message.kind_case()) {
    case proto::WorkerMessage::kHeartbeat: return absl::OkStatus();
    case proto::WorkerMessage::kAddress:
      return AddressReceived(worker_id, message.address().ucx_address(), now);
    case proto::WorkerMessage::kReady: return ReadyReceived(worker_id, now);
    case proto::WorkerMessage::kResult: return ResultReceived(worker_id, message.result(), now);
    case proto::WorkerMessage::kFailure:
      return FailureReported(worker_id, message.failure().message(), now);
    case proto::WorkerMessage::kFinished: return FinishedReceived(worker_id, now);
    case proto::WorkerMessage::kTrainingRow:
      return TrainingRowReceived(worker_id, message.training_row(), now);
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("worker ", worker_id, " sent a message of kind ", message.kind_case()));
  }
}

void CoordinatorCore::Heartbeat(std::uint32_t worker_id, Time now) {
  if (const std::optional<int> rank = RankOf(worker_id)) experiment_->ranks[*rank].last_seen = now;
}

// kPreparing -> kConnecting once every rank's address is in.
absl::Status CoordinatorCore::AddressReceived(std::uint32_t worker_id, std::string address,
                                              Time now) {
  absl::StatusOr<Rank*> rank = RankFor(worker_id, "its UCX address", {ExperimentState::kPreparing});
  if (!rank.ok()) return rank.status();
  if (address.empty()) {
    return absl::InvalidArgumentError(absl::StrCat((*rank)->name, " sent an empty UCX address"));
  }
  (*rank)->address = std::move(address);
  Experiment& e = *experiment_;
  if (std::any_of(e.ranks.begin(), e.ranks.end(), [](const Rank& r) { return r.address.empty(); })) {
    return absl::OkStatus();
  }
  proto::CoordinatorMessage connect;
  connect.mutable_connect()->set_experiment_id(e.id);
  for (const Rank& r : e.ranks) connect.mutable_connect()->add_ucx_addresses(r.address);
  SendToAll(connect);
  Enter(ExperimentState::kConnecting, now + timeouts_.handshake_timeout, "UCX connections");
  return absl::OkStatus();
}

// kConnecting -> kRunning once every rank is ready.
absl::Status CoordinatorCore::ReadyReceived(std::uint32_t worker_id, Time now) {
  absl::StatusOr<Rank*> rank = RankFor(worker_id, "Ready", {ExperimentState::kConnecting});
  if (!rank.ok()) return rank.status();
  (*rank)->ready = true;
  Experiment& e = *experiment_;
  if (!std::all_of(e.ranks.begin(), e.ranks.end(), [](const Rank& r) { return r.ready; })) {
    return absl::OkStatus();
  }
  proto::CoordinatorMessage start;
  start.mutable_start()->set_experiment_id(e.id);
  SendToAll(start);
  if (e.training) {
    Enter(ExperimentState::kRunning, TrainingDeadline(now, *e.training), "the training run");
    return absl::OkStatus();
  }
  Enter(ExperimentState::kRunning, now, "");
  AdvanceRows(now);
  return absl::OkStatus();
}

// Rank 0 reports; a row from another rank is refused, not relayed twice.
absl::Status CoordinatorCore::TrainingRowReceived(std::uint32_t worker_id,
                                                  const proto::TrainingRow& row, Time) {
  absl::StatusOr<Rank*> rank = RankFor(worker_id, "a training row", {ExperimentState::kRunning});
  if (!rank.ok()) return rank.status();
  if (!experiment_->training) {
    return absl::FailedPreconditionError(absl::StrCat(
        (*rank)->name, " sent a training row in experiment ", experiment_->id,
        ", which is no training run"));
  }
  if (*rank != &experiment_->ranks[0]) {
    return absl::FailedPreconditionError(
        absl::StrCat((*rank)->name, " sent a training row: only rank 0 reports"));
  }
  training_rows_.push_back(row);
  return absl::OkStatus();
}

absl::Status CoordinatorCore::ResultReceived(std::uint32_t worker_id,
                                             const proto::RankResult& result, Time now) {
  absl::StatusOr<Rank*> rank = RankFor(worker_id, "a result", {ExperimentState::kRunning});
  if (!rank.ok()) return rank.status();
  if (experiment_->training) {
    return absl::FailedPreconditionError(absl::StrCat(
        (*rank)->name, " sent a collective's result in training run ", experiment_->id));
  }
  experiment_->results[{result.algorithm(), result.bytes()}].push_back(result);
  AdvanceRows(now);
  return absl::OkStatus();
}

// In kRunning: aggregates every row whose N results are in, in spec order;
// each row's wait gets its own deadline. After the last: kCollecting.
void CoordinatorCore::AdvanceRows(Time now) {
  Experiment& e = *experiment_;
  const proto::ExperimentSpec& spec = e.spec;
  const int n = static_cast<int>(spec.workers());
  const int rows = spec.algorithms_size() * spec.sizes_size();
  while (state_ == ExperimentState::kRunning && e.next_row < rows) {
    const std::string& algorithm = spec.algorithms(e.next_row / spec.sizes_size());
    const std::int64_t bytes = spec.sizes(e.next_row % spec.sizes_size());
    const std::string what = absl::StrCat(algorithm, " at ", FormatByteSize(bytes));
    std::vector<proto::RankResult>& results = e.results[{algorithm, bytes}];
    if (static_cast<int>(results.size()) < n) {
      if (e.timed_row != e.next_row) {
        e.timed_row = e.next_row;
        Enter(ExperimentState::kRunning, RowDeadline(now, spec), what);
      }
      return;
    }
    std::sort(results.begin(), results.end(),
              [](const auto& a, const auto& b) { return a.rank() < b.rank(); });
    absl::StatusOr<std::vector<proto::ResultRow>> group_rows = AggregateRows(spec, results);
    if (!group_rows.ok()) {
      Fail(absl::InternalError(group_rows.status().message()));
      return;
    }
    ++e.next_row;
    for (proto::ResultRow& row : *group_rows) {
      // Under a split, one row per group (proto/result_aggregator.h).
      std::string note = absl::StrCat("[", e.next_row, "/", rows, "] ", what,
                                      GroupLabel(row, group_rows->size()), ": ",
                                      static_cast<std::int64_t>(row.time_us_avg()), " us, wrong ",
                                      row.wrong());
      rows_.push_back(Row{.row = std::move(row), .note = std::move(note)});
    }
  }
  if (state_ == ExperimentState::kRunning) {
    Enter(ExperimentState::kCollecting, now + timeouts_.handshake_timeout, "workers to finish");
  }
  if (state_ == ExperimentState::kCollecting &&
      std::all_of(e.ranks.begin(), e.ranks.end(), [](const Rank& r) { return r.finished; })) {
    state_ = ExperimentState::kDone;
    spdlog::info("experiment {} done", e.id);
  }
}

// A rank may finish while others still send their last rows.
absl::Status CoordinatorCore::FinishedReceived(std::uint32_t worker_id, Time now) {
  absl::StatusOr<Rank*> rank = RankFor(worker_id, "Finished",
                                       {ExperimentState::kRunning, ExperimentState::kCollecting});
  if (!rank.ok()) return rank.status();
  (*rank)->finished = true;
  if (state_ == ExperimentState::kCollecting) AdvanceRows(now);
  Experiment& e = *experiment_;
  if (e.training &&
      std::all_of(e.ranks.begin(), e.ranks.end(), [](const Rank& r) { return r.finished; })) {
    state_ = ExperimentState::kDone;
    spdlog::info("experiment {} (training) done", e.id);
  }
  return absl::OkStatus();
}

absl::Status CoordinatorCore::FailureReported(std::uint32_t worker_id, absl::string_view message,
                                              Time now) {
  absl::StatusOr<Rank*> rank =
      RankFor(worker_id, "a failure report",
              {ExperimentState::kPreparing, ExperimentState::kConnecting,
               ExperimentState::kRunning, ExperimentState::kCollecting});
  if (!rank.ok()) return rank.status();
  (*rank)->reported_failure = true;
  Experiment& e = *experiment_;
  if (e.peer_report.empty()) {
    e.peer_report = absl::StrCat((*rank)->name, " reported: ", message);
    e.peer_report_at = now;
  }
  return absl::OkStatus();
}

void CoordinatorCore::CheckDeadlines(Time now) {
  if (state_ == ExperimentState::kWaitingForWorkers) {
    if (now >= experiment_->deadline) {
      Fail(absl::UnavailableError(absl::StrCat("only ", WaitingFor(), " after ",
                                               experiment_->wait_for_workers.count(), " s")));
    }
    return;
  }
  if (!Active()) return;
  Experiment& e = *experiment_;
  if (now >= e.deadline) {
    Fail(absl::AbortedError(absl::StrCat("timed out waiting for ", e.awaiting)));
    return;
  }
  if (!e.peer_report.empty() && now - e.peer_report_at > timeouts_.report_hold_back) {
    // A rank that timed out waiting names its own peer, which may itself be
    // waiting on a hung rank further along: name every rank that has been
    // silent for three heartbeats, the likely cause.
    std::string failure = e.peer_report;
    for (const Rank& r : e.ranks) {
      const auto silence = now - r.last_seen;
      if (silence > 3 * timeouts_.heartbeat_interval) {
        absl::StrAppend(&failure, "; ", r.name, " has sent no heartbeat for ", Seconds(silence),
                        " s (hung?)");
      }
    }
    Fail(absl::AbortedError(failure));
    return;
  }
  for (const Rank& r : e.ranks) {
    const auto silence = now - r.last_seen;
    if (silence > timeouts_.heartbeat_timeout) {
      Fail(absl::AbortedError(absl::StrCat("lost ", r.name, ": no heartbeat for ", Seconds(silence),
                                           " s (process hung or network failed)")));
      return;
    }
  }
}

void CoordinatorCore::ClientGone() {
  if (state_ == ExperimentState::kWaitingForWorkers) {
    Fail(absl::CancelledError("cancelled while waiting for workers"));
  } else if (Active()) {
    Fail(absl::CancelledError("the client that submitted the experiment went away"));
  }
}

void CoordinatorCore::Shutdown() {
  shutting_down_ = true;
  if (state_ == ExperimentState::kWaitingForWorkers) {
    Fail(absl::CancelledError("cancelled while waiting for workers"));
  } else if (Active()) {
    Fail(absl::AbortedError("the coordinator is shutting down"));
  }
}

void CoordinatorCore::Fail(absl::Status status) {
  if (state_ == ExperimentState::kFailed || state_ == ExperimentState::kDone || !experiment_) return;
  Experiment& e = *experiment_;
  if (Active()) {
    spdlog::error("experiment {} failed: {}", e.id, std::string(status.message()));
    proto::CoordinatorMessage abort;
    abort.mutable_abort()->set_experiment_id(e.id);
    abort.mutable_abort()->set_reason(std::string(status.message()));
    SendToAll(abort);
  }
  e.failure = std::move(status);
  state_ = ExperimentState::kFailed;
}

absl::Status CoordinatorCore::Release() {
  if (state_ != ExperimentState::kDone && state_ != ExperimentState::kFailed) {
    return absl::FailedPreconditionError(
        absl::StrCat("experiment ", experiment_id(), " is ", StateName(state_), ", not over"));
  }
  absl::Status outcome = std::move(experiment_->failure);
  experiment_.reset();
  state_ = ExperimentState::kIdle;
  return outcome;
}

void CoordinatorCore::SendToAll(const proto::CoordinatorMessage& message) {
  for (const Rank& r : experiment_->ranks) outbox_.push_back(Outgoing{r.worker_id, message});
}

}  // namespace testbed
