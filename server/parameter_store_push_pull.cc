// The two directions of a parameter-server step: a worker's push joining its
// step chunk by chunk (BeginPush, PushSession: withdrawn or failing the step
// when it breaks off), and a pull waiting for its step, or in the stale modes
// for the consistency rule, then handing out the values (Await, Pull,
// PullStale). The rules are in server/parameter_store.h.
#include <chrono>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/parameter_store.h"
#include "server/parameter_store_tensor.h"

namespace testbed {

absl::StatusOr<std::unique_ptr<ParameterStore::PushSession>> ParameterStore::BeginPush(
    const std::string& name, std::uint32_t worker, std::uint64_t step) {
  std::shared_ptr<Tensor> t = Find(name);
  if (!t) return absl::NotFoundError(absl::StrCat("no tensor '", name, "' on this shard"));
  std::unique_lock lock(t->mu);
  if (worker >= t->spec.workers()) {
    return absl::InvalidArgumentError(absl::StrCat(t->Name(), " has ", t->spec.workers(),
                                                   " workers; there is no worker ", worker));
  }
  if (t->stale) {
    if (t->broken) return t->failure;
    if (step <= t->clock[worker]) {
      return absl::FailedPreconditionError(absl::StrCat(
          t->Name(), ": worker ", worker, " already pushed step ", step, " (it is at step ",
          t->clock[worker], ")"));
    }
    if (step != t->clock[worker] + 1) {
      return absl::FailedPreconditionError(
          absl::StrCat(t->Name(), ": step ", step, " is not open for worker ", worker,
                       "; its next step is ", t->clock[worker] + 1));
    }
    if (t->pushing[worker]) {
      return absl::AlreadyExistsError(
          absl::StrCat(t->Name(), ": worker ", worker, " is already pushing step ", step));
    }
    t->pushing[worker] = true;
    t->staged[worker] = 0;
    std::unique_ptr<PushSession> session(new PushSession(*this, t, worker, step));
    if (t->slice.count == 0) ApplyPush(*t, worker, step, lock);  // nothing to push
    return session;
  }
  if (step <= t->completed) {
    return absl::FailedPreconditionError(
        absl::StrCat(t->Name(), ": step ", step, " is already complete (at step ", t->completed,
                     ")"));
  }
  if (step > t->completed + 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        t->Name(), ": step ", step, " is not open; step ", t->completed + 1, " is"));
  }
  if (t->failed_step == step) return t->failure;
  if (t->joined[worker]) {
    return absl::AlreadyExistsError(
        absl::StrCat(t->Name(), ": worker ", worker, " already pushed step ", step));
  }
  t->joined[worker] = true;
  std::unique_ptr<PushSession> session(new PushSession(*this, t, worker, step));
  if (++t->joins == t->spec.workers()) ServeOpenStep(*t, lock);
  if (t->slice.count == 0) t->CountPush(worker);  // nothing to push: complete already
  return session;
}

ParameterStore::PushSession::~PushSession() {
  if (!finished_ && next_ != tensor_->slice.count) {
    Fail(absl::AbortedError("its stream ended before the push was complete"));
  }
}

proto::TensorSpec::PushEncoding ParameterStore::PushSession::push_encoding() const {
  return tensor_->spec.push_encoding();  // set once at Declare, never changed
}

void ParameterStore::PushSession::Fail(const absl::Status& why) {
  Tensor& t = *tensor_;
  std::lock_guard lock(t.mu);
  finished_ = true;
  if (next_ == t.slice.count) return;  // complete: a chunk past the end changes nothing
  if (t.stale) {
    // Nothing of the push was applied, but its worker's clock would never
    // move again: the tensor fails, so that nobody waits for it.
    t.open[worker_] = StagedPush{};
    t.staged[worker_] = 0;
    t.pushing[worker_] = false;
    if (!t.broken) {
      t.broken = true;
      t.failure = absl::AbortedError(absl::StrCat(
          t.Name(), ": worker ", worker_, "'s push of step ", step_, " broke off after ", next_,
          " of ", t.slice.count, " elements (", why.message(),
          "); forget and declare the tensor again to start over"));
    }
    t.changed_cv.notify_all();
    return;
  }
  if (t.failed_step == step_) return;  // another worker's push failed it first
  if (t.served != step_) {
    // Not every worker has joined, so nothing of the step has been worked
    // out: the push is withdrawn as if it never began, and may begin again.
    t.open[worker_] = StagedPush{};
    t.staged[worker_] = 0;
    t.joined[worker_] = false;
    --t.joins;
    return;
  }
  // Chunks with this worker's gradient may have been served already: the
  // step cannot complete consistently, so its pulls fail rather than wait.
  t.failed_step = step_;
  t.failure = absl::AbortedError(absl::StrCat(
      t.Name(), ": step ", step_, " failed: worker ", worker_, "'s push broke off after ", next_,
      " of ", t.slice.count, " elements (", why.message(),
      "); forget and declare the tensor again to start over"));
  t.changed_cv.notify_all();
}

absl::Status ParameterStore::PushSession::AddChunk(std::int64_t offset,
                                                   std::span<const std::byte> data) {
  return AddChunk(offset, std::string(reinterpret_cast<const char*>(data.data()), data.size()));
}

absl::Status ParameterStore::PushSession::AddChunk(std::int64_t offset, std::string&& data) {
  auto owned = std::make_shared<const std::string>(std::move(data));
  const std::span<const std::byte> piece = std::as_bytes(std::span(*owned));
  return AddChunk(offset, std::span(&piece, 1), std::move(owned));
}

absl::Status ParameterStore::PushSession::AddChunk(
    std::int64_t offset, std::span<const std::span<const std::byte>> pieces,
    std::shared_ptr<const void> owner) {
  Tensor& t = *tensor_;
  if (finished_) return absl::FailedPreconditionError("this push has ended");
  const std::int64_t begin = t.slice.offset + next_;
  std::size_t bytes = 0;
  for (const std::span<const std::byte> piece : pieces) bytes += piece.size();
  if (bytes % t.element != 0) {
    absl::Status refused = absl::InvalidArgumentError(
        absl::StrCat(t.Name(), ": a chunk of ", bytes, " bytes is not whole elements"));
    Fail(refused);
    return refused;
  }
  const auto count = static_cast<std::int64_t>(bytes / t.element);
  if (offset != begin || offset + count > t.slice.offset + t.slice.count) {
    absl::Status refused = absl::OutOfRangeError(absl::StrCat(
        t.Name(), ": chunk [", offset, ", ", offset + count, ") is outside this shard's slice [",
        t.slice.offset, ", ", t.slice.offset + t.slice.count, ") or out of order (expected offset ",
        begin, ")"));
    Fail(refused);
    return refused;
  }
  std::unique_lock lock(t.mu);
  if (t.failed_step == step_ || t.broken) {
    finished_ = true;
    return t.failure;
  }
  store_.bytes_received_ += bytes;
  next_ += count;
  if (bytes == 0) return absl::OkStatus();
  if (t.stale) {  // staged until the push is complete, then applied on its own
    StagedPush& into = t.open[worker_];
    for (const std::span<const std::byte> piece : pieces) {
      if (!piece.empty()) into.pieces.push_back(piece);
    }
    into.owners.push_back(std::move(owner));
    t.staged[worker_] = next_;
    if (next_ == t.slice.count) store_.ApplyPush(t, worker_, step_, lock);
    return absl::OkStatus();
  }
  const bool served = t.served == step_;  // else the step waits for workers to join
  StagedPush& into = served ? t.gradients[worker_] : t.open[worker_];
  for (const std::span<const std::byte> piece : pieces) {
    if (!piece.empty()) into.pieces.push_back(piece);
  }
  into.owners.push_back(std::move(owner));
  t.staged[worker_] = next_;
  if (served) {
    if (const std::size_t ready = t.StagedChunks(); ready > t.ready) {
      t.ready = ready;
      t.changed_cv.notify_all();
    }
  }
  if (next_ == t.slice.count) t.CountPush(worker_);  // after `ready`: it may complete the step
  return absl::OkStatus();
}

absl::Status ParameterStore::PushSession::Commit() {
  Tensor& t = *tensor_;
  if (finished_) return absl::FailedPreconditionError("this push has ended");
  if (next_ != t.slice.count) {
    absl::Status incomplete = absl::InvalidArgumentError(
        absl::StrCat(t.Name(), ": the push of step ", step_, " covered ", next_, " of ",
                     t.slice.count, " elements"));
    Fail(incomplete);
    return incomplete;
  }
  // The push counted when it covered the slice; only a failure is news here.
  std::lock_guard lock(t.mu);
  finished_ = true;
  if (t.failed_step == step_) return t.failure;
  return absl::OkStatus();  // stale modes: applied already, whatever failed since
}

absl::Status ParameterStore::Await(Tensor& t, std::unique_lock<std::mutex>& lock,
                                   std::chrono::steady_clock::time_point deadline,
                                   const std::function<bool()>& gone,
                                   const std::function<bool()>& done,
                                   const std::function<std::string()>& waiting_for) {
  while (!done()) {
    {
      std::lock_guard store_lock(mu_);
      if (shutdown_) return absl::UnavailableError("the parameter server is shutting down");
    }
    if (gone && gone()) return absl::CancelledError("the puller went away");
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return absl::DeadlineExceededError(waiting_for());
    t.changed_cv.wait_until(lock, gone ? std::min(deadline, now + kGoneCheck) : deadline);
  }
  return absl::OkStatus();
}

absl::Status ParameterStore::Pull(const std::string& name, std::uint64_t step,
                                  std::chrono::steady_clock::time_point deadline,
                                  const EmitChunk& emit, const std::function<bool()>& gone,
                                  std::optional<std::uint32_t> puller) {
  std::shared_ptr<Tensor> t = Find(name);
  if (!t) return absl::NotFoundError(absl::StrCat("no tensor '", name, "' on this shard"));
  std::unique_lock lock(t->mu);
  if (t->stale) return PullStale(*t, lock, step, puller, deadline, emit, gone);
  const auto failed = [&] { return t->failed_step == step; };
  absl::Status st = Await(
      *t, lock, deadline, gone, [&] { return t->served >= step || failed(); },
      [&] {
        return absl::StrCat(t->Name(), ": step ", step,
                            " did not complete; still waiting for workers ", t->WorkersShortOf(0));
      });
  for (std::size_t k = 0; st.ok(); ++k) {
    if (failed()) return t->failure;
    if (t->served != step) {
      return absl::FailedPreconditionError(absl::StrCat(
          t->Name(), ": step ", step, " is gone; this shard holds step ", t->served));
    }
    if (k == t->chunks.size()) break;
    st = Await(
        *t, lock, deadline, gone,
        [&] { return t->ChunkReady(k) || failed() || t->served != step; },
        [&] {
          return absl::StrCat(t->Name(), ": step ", step, " did not complete; still waiting for "
                              "workers ", t->WorkersShortOf(t->ChunkEnd(k)), " to push elements [",
                              t->slice.offset + t->ChunkBegin(k), ", ",
                              t->slice.offset + t->ChunkEnd(k), ")");
        });
    if (!st.ok() || failed() || t->served != step) continue;  // said at the loop's top
    WorkOut(*t, k, lock);
    std::shared_ptr<const Bytes> values = t->values;  // held by the transport while it sends
    lock.unlock();
    const std::size_t at = static_cast<std::size_t>(t->ChunkBegin(k)) * t->element;
    const std::size_t n = static_cast<std::size_t>(t->ChunkEnd(k) - t->ChunkBegin(k)) * t->element;
    if (!emit(t->slice.offset + t->ChunkBegin(k), std::span(values->data() + at, n), values)) {
      return absl::CancelledError("the puller went away");
    }
    bytes_sent_ += n;
    lock.lock();
  }
  return st;
}

absl::Status ParameterStore::PullStale(Tensor& t, std::unique_lock<std::mutex>& lock,
                                      std::uint64_t step, std::optional<std::uint32_t> puller,
                                      std::chrono::steady_clock::time_point deadline,
                                      const EmitChunk& emit, const std::function<bool()>& gone) {
  if (puller && *puller >= t.spec.workers()) puller.reset();  // not one of the workers
  absl::Status st = Await(
      t, lock, deadline, gone, [&] { return t.broken || t.StaleReady(step, puller); },
      [&] {
        return absl::StrCat(t.Name(), ": a pull of step ", step, " (staleness ",
                            t.staleness == std::numeric_limits<std::uint64_t>::max()
                                ? std::string("unbounded")
                                : absl::StrCat(t.staleness),
                            ") is still waiting for workers ", t.WorkersBehind(step, puller));
      });
  if (!st.ok()) return st;
  if (t.broken) return t.failure;
  const std::shared_ptr<const Bytes> values = t.values;  // one version, kept while it is sent
  lock.unlock();
  for (std::size_t k = 0; k < t.chunks.size(); ++k) {
    const std::size_t at = static_cast<std::size_t>(t.ChunkBegin(k)) * t.element;
    const std::size_t n = static_cast<std::size_t>(t.ChunkEnd(k) - t.ChunkBegin(k)) * t.element;
    if (!emit(t.slice.offset + t.ChunkBegin(k), std::span(values->data() + at, n), values)) {
      return absl::CancelledError("the puller went away");
    }
    bytes_sent_ += n;
  }
  return absl::OkStatus();
}

}  // namespace testbed
