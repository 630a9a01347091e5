#include "server/coordinator_service.h"

#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "proto/grpc_status.h"

namespace testbed {

using Clock = CoordinatorClock;

struct CoordinatorService::WorkerSession {
  std::uint32_t id = 0;
  std::string host;
  std::uint32_t pid = 0;
  grpc::ServerReaderWriter<proto::CoordinatorMessage, proto::WorkerMessage>* stream = nullptr;
  std::mutex write_mu;  // one writer at a time on `stream`

  std::string Describe() const {
    return absl::StrCat("worker ", id, " (", host, " pid ", pid, ")");
  }
  // False once the worker's stream is gone.
  bool Send(const proto::CoordinatorMessage& message) {
    std::lock_guard lock(write_mu);
    return stream != nullptr && stream->Write(message);
  }
};

namespace {

CoordinatorTimeouts TimeoutsOf(const CoordinatorOptions& options) {
  CoordinatorTimeouts timeouts;
  timeouts.heartbeat_interval = options.heartbeat_interval;
  timeouts.heartbeat_timeout = options.heartbeat_timeout;
  timeouts.handshake_timeout = options.handshake_timeout;
  return timeouts;
}

}  // namespace

CoordinatorService::CoordinatorService(CoordinatorOptions options)
    : options_(std::move(options)), core_(TimeoutsOf(options_)) {}

CoordinatorService::~CoordinatorService() { Shutdown(); }

void CoordinatorService::Shutdown() {
  std::lock_guard lock(mu_);
  core_.Shutdown();
  changed_.notify_all();
}

void CoordinatorService::SetOwnShardAddress(const std::string& address) {
  std::lock_guard lock(mu_);
  core_.SetOwnShardAddress(address);
}

absl::StatusOr<CallLimiter::Admission> CoordinatorService::AdmitCall(
    const grpc::ServerContext& context) {
  if (absl::Status st = FromGrpcStatus(CheckCredentials(options_.credentials, context));
      !st.ok()) {
    return st;
  }
  return options_.calls->Admit();
}

grpc::Status CoordinatorService::Health(grpc::ServerContext* context, const proto::HealthRequest*,
                                        proto::HealthReply* reply) {
  absl::StatusOr<CallLimiter::Admission> call = AdmitCall(*context);
  if (!call.ok()) return ToGrpcStatus(call.status());
  std::lock_guard lock(mu_);
  reply->set_workers_attached(core_.workers_attached());
  reply->set_experiment_running(core_.experiment_running());
  reply->set_version(TESTBED_VERSION);
  reply->set_shards(core_.shards());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::RegisterShard(grpc::ServerContext* context,
                                               const proto::ShardHello* request,
                                               proto::ShardWelcome* reply) {
  absl::StatusOr<CallLimiter::Admission> call = AdmitCall(*context);
  if (!call.ok()) return ToGrpcStatus(call.status());
  std::lock_guard lock(mu_);
  reply->set_shard_id(core_.ShardJoined(request->address(), Clock::now()));
  changed_.notify_all();
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Attach(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<proto::CoordinatorMessage, proto::WorkerMessage>* stream) {
  absl::StatusOr<CallLimiter::Admission> call = AdmitCall(*context);
  if (!call.ok()) {
    spdlog::warn("refused a worker from {}: {}", context->peer(),
                 std::string(call.status().message()));
    return ToGrpcStatus(call.status());
  }
  proto::WorkerMessage message;
  if (!stream->Read(&message) || !message.has_hello()) {
    return ToGrpcStatus(absl::InvalidArgumentError("a worker must start with Hello"));
  }
  auto worker = std::make_shared<WorkerSession>();
  worker->host = message.hello().host();
  worker->pid = message.hello().pid();
  worker->stream = stream;
  {
    std::lock_guard lock(mu_);
    const proto::Hello& hello = message.hello();
    absl::StatusOr<std::uint32_t> id = core_.ReserveWorkerId(
        hello.has_worker_id() ? std::optional(hello.worker_id()) : std::nullopt);
    if (!id.ok()) return ToGrpcStatus(id.status());
    worker->id = *id;
  }
  // Welcome goes out before the worker counts for the core, so it is always
  // the first message the worker reads.
  proto::CoordinatorMessage welcome;
  welcome.mutable_welcome()->set_worker_id(worker->id);
  welcome.mutable_welcome()->set_heartbeat_ms(options_.heartbeat_interval.count());
  if (!worker->Send(welcome)) {
    std::lock_guard lock(mu_);
    core_.WorkerLost(worker->id);  // frees the id it reserved
    return ToGrpcStatus(absl::UnavailableError("could not send the Welcome: the stream closed"));
  }
  {
    std::lock_guard lock(mu_);
    sessions_[worker->id] = worker;
    core_.WorkerAttached(worker->id, worker->host, worker->pid, Clock::now());
    changed_.notify_all();
  }
  spdlog::info("{} attached from {}", worker->Describe(), context->peer());
  if (message.hello().has_worker_id() && message.hello().worker_id() != worker->id) {
    spdlog::warn("{} asked to be worker {}, which another attached worker is", worker->Describe(),
                 message.hello().worker_id());
  }

  while (stream->Read(&message)) {
    absl::Status st;
    {
      std::lock_guard lock(mu_);
      st = core_.Deliver(worker->id, message, Clock::now());
      changed_.notify_all();
    }
    if (!st.ok()) spdlog::warn("{}: {}", worker->Describe(), std::string(st.message()));
  }
  {
    // The stream dies with this call: nobody may write to it after.
    std::lock_guard write_lock(worker->write_mu);
    worker->stream = nullptr;
  }
  {
    std::lock_guard lock(mu_);
    sessions_.erase(worker->id);
    core_.WorkerLost(worker->id);
    changed_.notify_all();
  }
  spdlog::info("{} detached", worker->Describe());
  return grpc::Status::OK;
}

void CoordinatorService::SendQueued(std::unique_lock<std::mutex>& lock) {
  std::vector<std::pair<std::shared_ptr<WorkerSession>, proto::CoordinatorMessage>> sends;
  for (CoordinatorCore::Outgoing& out : core_.TakeMessages()) {
    // A worker already gone misses its message, as its closed stream would.
    if (auto it = sessions_.find(out.worker_id); it != sessions_.end()) {
      sends.emplace_back(it->second, std::move(out.message));
    }
  }
  lock.unlock();
  for (auto& [worker, message] : sends) worker->Send(message);
  lock.lock();
}

// The experiment's driver: the only caller of Take* and Release, so the
// messages of one experiment leave in the order the core queued them.
grpc::Status CoordinatorService::Submit(grpc::ServerContext* context,
                                        const proto::SubmitRequest* request,
                                        grpc::ServerWriter<proto::SubmitEvent>* writer) {
  absl::StatusOr<CallLimiter::Admission> call = AdmitCall(*context);
  if (!call.ok()) return ToGrpcStatus(call.status());
  const std::chrono::seconds wait_for_workers(
      request->wait_for_workers_s() ? request->wait_for_workers_s() : 30);
  if (request->job_case() == proto::SubmitRequest::JOB_NOT_SET) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the request names no job: set spec (an experiment) or training");
  }
  std::unique_lock lock(mu_);
  if (absl::StatusOr<std::uint64_t> id =
          request->has_training()
              ? core_.SubmitTraining(request->training(), wait_for_workers, Clock::now())
              : core_.Submit(request->spec(), wait_for_workers, Clock::now());
      !id.ok()) {
    return ToGrpcStatus(id.status());
  }
  Clock::time_point next_note = Clock::now() + std::chrono::seconds(2);
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (context->IsCancelled()) core_.ClientGone();
    core_.CheckDeadlines(now);
    const ExperimentState state = core_.state();
    std::vector<proto::SubmitEvent> events;
    if (state == ExperimentState::kWaitingForWorkers && now >= next_note) {
      events.emplace_back().set_progress("waiting: " + core_.WaitingFor());
      next_note = now + std::chrono::seconds(5);
    }
    for (CoordinatorCore::Row& row : core_.TakeRows()) {
      if (state == ExperimentState::kFailed) break;  // the client gets the failure instead
      events.emplace_back().set_progress(std::move(row.note));
      *events.emplace_back().mutable_row() = std::move(row.row);
    }
    for (proto::TrainingRow& row : core_.TakeTrainingRows()) {
      if (state == ExperimentState::kFailed) break;
      *events.emplace_back().mutable_training_row() = std::move(row);
    }
    SendQueued(lock);
    bool written = true;
    lock.unlock();
    for (const proto::SubmitEvent& event : events) {
      if (!(written = writer->Write(event))) break;
    }
    lock.lock();
    // A waiting note nobody reads is no failure (IsCancelled says when the
    // client left); a row nobody reads is.
    if (!written && state != ExperimentState::kWaitingForWorkers) {
      core_.ClientGone();
      continue;
    }
    if (state == ExperimentState::kDone || state == ExperimentState::kFailed) break;
    // Whatever changed while mu_ was released is handled at once; deadlines
    // are checked at least every 200 ms.
    changed_.wait_for(lock, std::chrono::milliseconds(200),
                      [&] { return core_.state() != state || core_.has_queued(); });
  }
  const absl::Status outcome = core_.Release();
  changed_.notify_all();
  return ToGrpcStatus(outcome);
}

}  // namespace testbed
