#include "server/coordinator_service.h"

#include <algorithm>
#include <set>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "allreduce/collective.h"
#include "common/byte_size.h"
#include "proto/spec.h"
#include "server/result_aggregator.h"

namespace testbed {

using Clock = std::chrono::steady_clock;

struct CoordinatorService::WorkerSession {
  std::uint32_t id = 0;
  std::string host;
  std::uint32_t pid = 0;
  grpc::ServerReaderWriter<proto::CoordinatorMessage, proto::WorkerMessage>* stream = nullptr;
  std::mutex write_mu;          // one writer at a time on `stream`
  Clock::time_point last_seen;  // guarded by the service's mu_
  std::uint64_t experiment_id = 0;  // 0 when idle; guarded by mu_
  int rank = -1;                    // in that experiment; guarded by mu_
  bool reported_failure = false;    // it said why it stops; guarded by mu_

  std::string Describe() const {
    return absl::StrCat("worker ", id, " (", host, " pid ", pid, ")");
  }
  // False once the worker's stream is gone.
  bool Send(const proto::CoordinatorMessage& message) {
    std::lock_guard lock(write_mu);
    return stream != nullptr && stream->Write(message);
  }
};

struct CoordinatorService::Experiment {
  std::uint64_t id = 0;
  proto::ExperimentSpec spec;
  std::vector<std::shared_ptr<WorkerSession>> ranks;
  std::vector<std::string> addresses;  // by rank; empty until reported
  std::vector<std::string> shard_map;  // parameter-server shards, when ps runs
  int addressed = 0, ready = 0, finished = 0;
  std::map<std::pair<std::string, std::int64_t>, std::vector<proto::RankResult>> results;
  std::string failure;  // empty while healthy
  // A worker's own report of a failure ("lost connection to rank 3"). Held
  // back briefly: if the rank at fault is lost to the control plane too, the
  // failure names it first, with this report as the detail.
  std::string peer_report;
  Clock::time_point peer_report_at;

  std::string RankName(int rank) const {
    return absl::StrCat("rank ", rank, " (", ranks[rank]->Describe(), ")");
  }
};

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

CoordinatorService::CoordinatorService(CoordinatorOptions options) : options_(std::move(options)) {}

CoordinatorService::~CoordinatorService() { Shutdown(); }

void CoordinatorService::Shutdown() {
  std::lock_guard lock(mu_);
  shutting_down_ = true;
  if (running_) FailLocked(*running_, "the coordinator is shutting down");
  changed_.notify_all();
}

void CoordinatorService::SetOwnShardAddress(const std::string& address) {
  std::lock_guard lock(mu_);
  own_shard_address_ = address;
}

void CoordinatorService::FailLocked(Experiment& experiment, const std::string& reason) {
  if (experiment.failure.empty()) {
    experiment.failure = reason;
    spdlog::error("experiment {} failed: {}", experiment.id, reason);
  }
  changed_.notify_all();
}

grpc::Status CoordinatorService::Health(grpc::ServerContext* context, const proto::HealthRequest*,
                                        proto::HealthReply* reply) {
  if (grpc::Status st = CheckCredentials(options_.credentials, *context); !st.ok()) return st;
  std::lock_guard lock(mu_);
  reply->set_workers_attached(workers_.size());
  reply->set_experiment_running(running_ != nullptr);
  reply->set_version(TESTBED_VERSION);
  reply->set_shards(shards_.size() + 1);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::RegisterShard(grpc::ServerContext* context,
                                               const proto::ShardHello* request,
                                               proto::ShardWelcome* reply) {
  if (grpc::Status st = CheckCredentials(options_.credentials, *context); !st.ok()) return st;
  std::lock_guard lock(mu_);
  auto it = std::find(shards_.begin(), shards_.end(), request->address());
  if (it == shards_.end()) {
    shards_.push_back(request->address());
    it = shards_.end() - 1;
    spdlog::info("parameter-server shard {} joined at {}", shards_.size(), request->address());
  }
  reply->set_shard_id(static_cast<std::uint32_t>(it - shards_.begin()) + 1);
  changed_.notify_all();
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Attach(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<proto::CoordinatorMessage, proto::WorkerMessage>* stream) {
  if (grpc::Status st = CheckCredentials(options_.credentials, *context); !st.ok()) {
    spdlog::warn("refused a worker from {}: {}", context->peer(), st.error_message());
    return st;
  }
  proto::WorkerMessage message;
  if (!stream->Read(&message) || !message.has_hello()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a worker must start with Hello");
  }
  auto worker = std::make_shared<WorkerSession>();
  worker->host = message.hello().host();
  worker->pid = message.hello().pid();
  worker->stream = stream;
  {
    std::lock_guard lock(mu_);
    if (shutting_down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
    worker->id = next_worker_id_++;
  }
  // Welcome goes out before the worker is visible to Submit, so it is always
  // the first message the worker reads.
  proto::CoordinatorMessage welcome;
  welcome.mutable_welcome()->set_worker_id(worker->id);
  welcome.mutable_welcome()->set_heartbeat_ms(options_.heartbeat_interval.count());
  if (!worker->Send(welcome)) return grpc::Status::OK;
  {
    std::lock_guard lock(mu_);
    worker->last_seen = Clock::now();
    workers_[worker->id] = worker;
    changed_.notify_all();
  }
  spdlog::info("{} attached from {}", worker->Describe(), context->peer());

  while (stream->Read(&message)) Deliver(*worker, message);
  {
    // The stream dies with this call: nobody may write to it after.
    std::lock_guard write_lock(worker->write_mu);
    worker->stream = nullptr;
  }

  std::lock_guard lock(mu_);
  workers_.erase(worker->id);
  // A worker that reported its failure leaves as it said it would; one that
  // just vanishes is the lost one.
  if (running_ && worker->experiment_id == running_->id && !worker->reported_failure) {
    const std::string& report = running_->peer_report;
    FailLocked(*running_, absl::StrCat("lost ", running_->RankName(worker->rank),
                                       ": its control stream closed (process died or network "
                                       "failed)",
                                       report.empty() ? "" : "; ", report));
  }
  spdlog::info("{} detached", worker->Describe());
  changed_.notify_all();
  return grpc::Status::OK;
}

void CoordinatorService::Deliver(WorkerSession& worker, const proto::WorkerMessage& message) {
  std::lock_guard lock(mu_);
  worker.last_seen = Clock::now();
  if (message.has_heartbeat()) return;
  if (!running_ || worker.experiment_id != running_->id) {
    spdlog::warn("{} sent a message for no running experiment", worker.Describe());
    return;
  }
  Experiment& e = *running_;
  const int rank = worker.rank;
  switch (message.kind_case()) {
    case proto::WorkerMessage::kAddress:
      if (e.addresses[rank].empty()) ++e.addressed;
      e.addresses[rank] = message.address().ucx_address();
      break;
    case proto::WorkerMessage::kReady: ++e.ready; break;
    case proto::WorkerMessage::kResult: {
      const proto::RankResult& result = message.result();
      e.results[{result.algorithm(), result.bytes()}].push_back(result);
      break;
    }
    case proto::WorkerMessage::kFailure:
      worker.reported_failure = true;
      if (e.peer_report.empty()) {
        e.peer_report = absl::StrCat(e.RankName(rank), " reported: ", message.failure().message());
        e.peer_report_at = Clock::now();
      }
      break;
    case proto::WorkerMessage::kFinished: ++e.finished; break;
    default: break;
  }
  changed_.notify_all();
}

grpc::Status CoordinatorService::WaitLocked(std::unique_lock<std::mutex>& lock,
                                            Experiment& e, Clock::time_point deadline,
                                            const std::string& what,
                                            grpc::ServerContext* client,
                                            const std::function<bool()>& done) {
  while (e.failure.empty() && !done()) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      FailLocked(e, absl::StrCat("timed out waiting for ", what));
      break;
    }
    if (client->IsCancelled()) {
      FailLocked(e, "the client that submitted the experiment went away");
      break;
    }
    if (!e.peer_report.empty() && now - e.peer_report_at > std::chrono::seconds(2)) {
      // A rank that timed out waiting names its own peer, which may itself
      // be waiting on a hung rank further along: name every rank that has
      // been silent for three heartbeats, the likely cause.
      std::string failure = e.peer_report;
      for (std::size_t r = 0; r < e.ranks.size(); ++r) {
        const auto silence = now - e.ranks[r]->last_seen;
        if (silence > 3 * options_.heartbeat_interval) {
          absl::StrAppend(&failure, "; ", e.RankName(r), " has sent no heartbeat for ",
                          std::chrono::duration_cast<std::chrono::seconds>(silence).count(),
                          " s (hung?)");
        }
      }
      FailLocked(e, failure);
      break;
    }
    for (std::size_t r = 0; r < e.ranks.size(); ++r) {
      const auto silence = now - e.ranks[r]->last_seen;
      if (silence > options_.heartbeat_timeout) {
        FailLocked(e, absl::StrCat(
                          "lost ", e.RankName(r), ": no heartbeat for ",
                          std::chrono::duration_cast<std::chrono::seconds>(silence).count(),
                          " s (process hung or network failed)"));
      }
    }
    changed_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(500)));
  }
  if (!e.failure.empty()) return grpc::Status(grpc::StatusCode::ABORTED, e.failure);
  return grpc::Status::OK;
}

void CoordinatorService::SendToAll(const Experiment& e, const proto::CoordinatorMessage& message) {
  for (const auto& worker : e.ranks) worker->Send(message);
}

grpc::Status CoordinatorService::Submit(grpc::ServerContext* context,
                                        const proto::SubmitRequest* request,
                                        grpc::ServerWriter<proto::SubmitEvent>* writer) {
  if (grpc::Status st = CheckCredentials(options_.credentials, *context); !st.ok()) return st;
  proto::ExperimentSpec spec = request->spec();
  ApplyDefaults(spec);
  if (absl::Status st = ValidateSpec(spec); !st.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(st.message()));
  }
  const auto progress = [&](const std::string& line) {
    proto::SubmitEvent event;
    event.set_progress(line);
    writer->Write(event);
  };

  std::unique_lock lock(mu_);
  if (running_) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("experiment ", running_->id, " is still running"));
  }
  // One experiment at a time, counting the one still waiting for its workers:
  // two waiting at once would both start on the same workers when they came.
  if (waiting_for_workers_ != 0) {
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("experiment ", waiting_for_workers_,
                     " is waiting for workers; submit again when it has finished"));
  }
  // Wait for N idle workers.
  const auto wait_s = request->wait_for_workers_s() ? request->wait_for_workers_s() : 30;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(wait_s);
  Clock::time_point next_note = Clock::now() + std::chrono::seconds(2);
  const bool ps = UsesParameterServer(spec);
  if (ps && own_shard_address_.empty()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this coordinator has no parameter-server address (--advertise)");
  }
  const std::uint64_t experiment_id = next_experiment_id_++;
  waiting_for_workers_ = experiment_id;
  // Every way out of the wait below ends it (with mu_ held: `lock` outlives this).
  struct EndWait {
    std::uint64_t& waiting;
    std::uint64_t id;
    ~EndWait() {
      if (waiting == id) waiting = 0;
    }
  } end_wait{waiting_for_workers_, experiment_id};
  const auto shards_known = [&] { return !ps || shards_.size() + 1 >= spec.servers(); };
  while (workers_.size() < spec.workers() || !shards_known()) {
    if (shutting_down_ || context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while waiting for workers");
    }
    const std::string waiting =
        absl::StrCat(workers_.size(), " of ", spec.workers(), " workers attached",
                     ps ? absl::StrCat(", ", shards_.size() + 1, " of ", spec.servers(),
                                       " parameter-server shards")
                        : "");
    if (Clock::now() >= deadline) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("only ", waiting, " after ", wait_s, " s"));
    }
    if (Clock::now() >= next_note) {
      lock.unlock();
      progress("waiting: " + waiting);
      lock.lock();
      next_note = Clock::now() + std::chrono::seconds(5);
    }
    changed_.wait_for(lock, std::chrono::milliseconds(200));
  }
  std::vector<std::string> shard_map;
  if (ps) {
    shard_map.push_back(own_shard_address_);
    shard_map.insert(shard_map.end(), shards_.begin(), shards_.begin() + (spec.servers() - 1));
  }

  auto experiment = std::make_shared<Experiment>();
  experiment->id = experiment_id;
  experiment->spec = spec;
  experiment->addresses.resize(spec.workers());
  for (auto& [id, worker] : workers_) {
    if (experiment->ranks.size() == spec.workers()) break;
    worker->experiment_id = experiment->id;
    worker->rank = static_cast<int>(experiment->ranks.size());
    worker->last_seen = Clock::now();
    experiment->ranks.push_back(worker);
  }
  running_ = experiment;
  waiting_for_workers_ = 0;
  spdlog::info("experiment {}: {} workers, {} algorithms x {} sizes", experiment->id,
               spec.workers(), spec.algorithms_size(), spec.sizes_size());

  experiment->shard_map = shard_map;
  grpc::Status status = RunExperiment(lock, experiment, context, writer);
  if (!status.ok()) {
    proto::CoordinatorMessage abort;
    abort.mutable_abort()->set_experiment_id(experiment->id);
    abort.mutable_abort()->set_reason(status.error_message());
    lock.unlock();
    SendToAll(*experiment, abort);
    lock.lock();
  }
  for (const auto& worker : experiment->ranks) {
    worker->experiment_id = 0;
    worker->rank = -1;
  }
  running_ = nullptr;
  changed_.notify_all();
  return status;
}

grpc::Status CoordinatorService::RunExperiment(std::unique_lock<std::mutex>& lock,
                                               const std::shared_ptr<Experiment>& experiment,
                                               grpc::ServerContext* client,
                                               grpc::ServerWriter<proto::SubmitEvent>* writer) {
  Experiment& e = *experiment;
  const proto::ExperimentSpec& spec = e.spec;
  const int n = static_cast<int>(spec.workers());
  const auto unlocked = [&](auto&& action) {
    lock.unlock();
    action();
    lock.lock();
  };
  const auto handshake_deadline = [&] { return Clock::now() + options_.handshake_timeout; };

  for (int r = 0; r < n; ++r) {
    proto::CoordinatorMessage prepare;
    prepare.mutable_prepare()->set_experiment_id(e.id);
    prepare.mutable_prepare()->set_rank(r);
    prepare.mutable_prepare()->set_world_size(n);
    *prepare.mutable_prepare()->mutable_spec() = spec;
    for (const std::string& shard : e.shard_map) prepare.mutable_prepare()->add_shard_addresses(shard);
    unlocked([&] { e.ranks[r]->Send(prepare); });
  }
  if (grpc::Status st = WaitLocked(lock, e, handshake_deadline(), "UCX addresses", client,
                                   [&] { return e.addressed == n; });
      !st.ok()) {
    return st;
  }
  proto::CoordinatorMessage connect;
  connect.mutable_connect()->set_experiment_id(e.id);
  for (const std::string& address : e.addresses) connect.mutable_connect()->add_ucx_addresses(address);
  unlocked([&] { SendToAll(e, connect); });
  if (grpc::Status st = WaitLocked(lock, e, handshake_deadline(), "UCX connections", client,
                                   [&] { return e.ready == n; });
      !st.ok()) {
    return st;
  }
  proto::CoordinatorMessage start;
  start.mutable_start()->set_experiment_id(e.id);
  unlocked([&] { SendToAll(e, start); });

  const int rows = spec.algorithms_size() * spec.sizes_size();
  int row_index = 0;
  for (const std::string& algorithm : spec.algorithms()) {
    for (const std::int64_t bytes : spec.sizes()) {
      auto& results = e.results[{algorithm, bytes}];
      const std::string what = absl::StrCat(algorithm, " at ", FormatByteSize(bytes));
      if (grpc::Status st = WaitLocked(lock, e, RowDeadline(Clock::now(), spec), what, client,
                                       [&] { return static_cast<int>(results.size()) == n; });
          !st.ok()) {
        return st;
      }
      std::sort(results.begin(), results.end(),
                [](const auto& a, const auto& b) { return a.rank() < b.rank(); });
      absl::StatusOr<proto::ResultRow> row = AggregateRow(spec, results);
      if (!row.ok()) {
        FailLocked(e, std::string(row.status().message()));
        return grpc::Status(grpc::StatusCode::INTERNAL, e.failure);
      }
      ++row_index;
      proto::SubmitEvent event;
      *event.mutable_row() = *row;
      proto::SubmitEvent note;
      note.set_progress(absl::StrCat("[", row_index, "/", rows, "] ", what, ": ",
                                     static_cast<std::int64_t>(row->time_us_avg()), " us, wrong ",
                                     row->wrong()));
      bool written = true;
      unlocked([&] { written = writer->Write(note) && writer->Write(event); });
      if (!written) {
        FailLocked(e, "the client that submitted the experiment went away");
        return grpc::Status(grpc::StatusCode::CANCELLED, e.failure);
      }
    }
  }
  return WaitLocked(lock, e, handshake_deadline(), "workers to finish", client,
                    [&] { return e.finished == n; });
}

}  // namespace testbed
