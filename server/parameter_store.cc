#include "server/parameter_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "allreduce/chunking.h"

namespace testbed {

struct ParameterStore::Tensor {
  proto::TensorSpec spec;
  int shards = 1, shard = 0;
  Slice slice;
  DataType type = DataType::kFloat32;
  std::size_t element = 4;

  std::mutex mu;
  std::condition_variable completed_cv;
  std::uint64_t completed = 0;          // the last complete step
  std::vector<bool> pushed;             // by worker, for step completed + 1
  std::uint32_t pushes = 0;             // how many are true
  std::vector<std::byte> sum;           // gradients of the open step, summed (the first
                                        // push of a step overwrites it: no zeroing)
  std::vector<std::byte> values;        // what pulls of `completed` get
  std::vector<double> velocity, second; // optimizer state (momentum / Adam)

  std::size_t bytes() const { return static_cast<std::size_t>(slice.count) * element; }
  std::string Name() const { return absl::StrCat("tensor '", spec.name(), "'"); }
};

namespace {

bool SameDeclaration(const proto::TensorSpec& a, const proto::TensorSpec& b) {
  return a.SerializeAsString() == b.SerializeAsString();
}

// out[i] += in[i] for n elements. `in` may be unaligned (a piece of a
// received message starts anywhere), so it is read through memcpy, which
// compiles to plain unaligned loads. The fixed-size inner loop is what GCC's
// -O2 vectorizes (its cheap cost model refuses loops that need a scalar tail).
template <typename T>
void AddInto(T* __restrict out, const std::byte* __restrict in, std::size_t n) {
  constexpr std::size_t kBlock = 64;
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (std::size_t j = 0; j < kBlock; ++j) {
      T v;
      std::memcpy(&v, in + (i + j) * sizeof(T), sizeof(T));
      out[i + j] += v;
    }
  }
  for (; i < n; ++i) {
    T v;
    std::memcpy(&v, in + i * sizeof(T), sizeof(T));
    out[i] += v;
  }
}

// Adds the elements that `pieces` hold together into `dst`; an element may
// straddle two pieces.
template <typename T>
void AddPiecesInto(std::byte* dst, std::span<const std::span<const std::byte>> pieces) {
  T* out = reinterpret_cast<T*>(dst);
  std::byte partial[sizeof(T)];  // the start of an element cut by a piece's end
  std::size_t have = 0;
  for (const std::span<const std::byte> piece : pieces) {
    const std::byte* p = piece.data();
    std::size_t left = piece.size();
    if (have > 0) {
      const std::size_t take = std::min(sizeof(T) - have, left);
      std::memcpy(partial + have, p, take);
      have += take;
      p += take;
      left -= take;
      if (have < sizeof(T)) continue;
      AddInto<T>(out++, partial, 1);
      have = 0;
    }
    const std::size_t n = left / sizeof(T);
    AddInto<T>(out, p, n);
    out += n;
    p += n * sizeof(T);
    have = left - n * sizeof(T);
    std::memcpy(partial, p, have);
  }
}

// Turns the summed gradient into the values pulls will see.
template <typename T>
void Apply(const proto::Optimizer& opt, std::uint64_t step, std::uint32_t workers,
           std::vector<std::byte>& sum, std::vector<std::byte>& values,
           std::vector<double>& velocity, std::vector<double>& second) {
  const std::int64_t n = static_cast<std::int64_t>(sum.size() / sizeof(T));
  T* g = reinterpret_cast<T*>(sum.data());
  if (opt.average()) {
    for (std::int64_t i = 0; i < n; ++i) g[i] = static_cast<T>(g[i] / static_cast<T>(workers));
  }
  if (opt.kind() == proto::Optimizer::NONE) {
    values.swap(sum);  // the aggregate itself; the next step's first push overwrites `sum`
    return;
  }
  T* w = reinterpret_cast<T*>(values.data());
  const double lr = opt.learning_rate();
  switch (opt.kind()) {
    case proto::Optimizer::SGD:
      for (std::int64_t i = 0; i < n; ++i) w[i] = static_cast<T>(w[i] - lr * g[i]);
      break;
    case proto::Optimizer::MOMENTUM:
      for (std::int64_t i = 0; i < n; ++i) {
        velocity[i] = opt.momentum() * velocity[i] + g[i];
        w[i] = static_cast<T>(w[i] - lr * velocity[i]);
      }
      break;
    case proto::Optimizer::ADAM: {
      const double b1 = opt.beta1() > 0 ? opt.beta1() : 0.9;
      const double b2 = opt.beta2() > 0 ? opt.beta2() : 0.999;
      const double eps = opt.epsilon() > 0 ? opt.epsilon() : 1e-8;
      const double c1 = 1 - std::pow(b1, static_cast<double>(step));
      const double c2 = 1 - std::pow(b2, static_cast<double>(step));
      for (std::int64_t i = 0; i < n; ++i) {
        velocity[i] = b1 * velocity[i] + (1 - b1) * g[i];
        second[i] = b2 * second[i] + (1 - b2) * static_cast<double>(g[i]) * g[i];
        w[i] = static_cast<T>(w[i] - lr * (velocity[i] / c1) / (std::sqrt(second[i] / c2) + eps));
      }
      break;
    }
    default:
      break;
  }
}

}  // namespace

ParameterStore::~ParameterStore() { Shutdown(); }

void ParameterStore::Shutdown() {
  std::vector<std::shared_ptr<Tensor>> all;
  {
    std::lock_guard lock(mu_);
    shutdown_ = true;
    for (auto& [name, tensor] : tensors_) all.push_back(tensor);
  }
  for (auto& tensor : all) {
    std::lock_guard lock(tensor->mu);
    tensor->completed_cv.notify_all();
  }
}

absl::StatusOr<ParameterStore::Slice> ParameterStore::Declare(const proto::TensorSpec& spec,
                                                              int shards, int shard) {
  const auto type = ParseDataType(spec.dtype());
  if (spec.name().empty()) return absl::InvalidArgumentError("a tensor needs a name");
  if (!type) return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", spec.dtype(), "'"));
  if (spec.count() < 0 || spec.workers() < 1 || shards < 1 || shard < 0 || shard >= shards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad declaration of '", spec.name(), "': count ", spec.count(), ", workers ",
        spec.workers(), ", shard ", shard, " of ", shards));
  }
  if (*type == DataType::kInt32 && spec.optimizer().kind() != proto::Optimizer::NONE) {
    return absl::InvalidArgumentError("int32 tensors only aggregate (optimizer NONE)");
  }
  std::lock_guard lock(mu_);
  if (auto it = tensors_.find(spec.name()); it != tensors_.end()) {
    const Tensor& t = *it->second;
    if (!SameDeclaration(t.spec, spec) || t.shards != shards || t.shard != shard) {
      return absl::AlreadyExistsError(
          absl::StrCat(t.Name(), " is already declared differently on this shard"));
    }
    return t.slice;
  }
  auto t = std::make_shared<Tensor>();
  t->spec = spec;
  t->shards = shards;
  t->shard = shard;
  const Chunk chunk = ChunkOf(spec.count(), shards, shard);
  t->slice = {chunk.offset, chunk.count};
  t->type = *type;
  t->element = ElementSize(*type);
  t->pushed.assign(spec.workers(), false);
  // Touch everything now, not during the first timed step.
  t->sum.assign(t->bytes(), std::byte{0});
  t->values.assign(t->bytes(), std::byte{0});
  if (spec.optimizer().kind() == proto::Optimizer::MOMENTUM ||
      spec.optimizer().kind() == proto::Optimizer::ADAM) {
    t->velocity.assign(chunk.count, 0.0);
  }
  if (spec.optimizer().kind() == proto::Optimizer::ADAM) t->second.assign(chunk.count, 0.0);
  tensors_[spec.name()] = t;
  return t->slice;
}

void ParameterStore::Forget(const std::string& name) {
  std::lock_guard lock(mu_);
  tensors_.erase(name);
}

std::shared_ptr<ParameterStore::Tensor> ParameterStore::Find(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

absl::StatusOr<std::unique_ptr<ParameterStore::PushSession>> ParameterStore::BeginPush(
    const std::string& name, std::uint32_t worker, std::uint64_t step) {
  std::shared_ptr<Tensor> t = Find(name);
  if (!t) return absl::NotFoundError(absl::StrCat("no tensor '", name, "' on this shard"));
  std::lock_guard lock(t->mu);
  if (worker >= t->spec.workers()) {
    return absl::InvalidArgumentError(absl::StrCat(t->Name(), " has ", t->spec.workers(),
                                                   " workers; there is no worker ", worker));
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
  if (t->pushed[worker]) {
    return absl::AlreadyExistsError(
        absl::StrCat(t->Name(), ": worker ", worker, " already pushed step ", step));
  }
  return std::unique_ptr<PushSession>(new PushSession(*this, t, worker, step));
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
  const std::int64_t begin = t.slice.offset + next_;
  std::size_t bytes = 0;
  for (const std::span<const std::byte> piece : pieces) bytes += piece.size();
  if (bytes % t.element != 0) {
    return absl::InvalidArgumentError(absl::StrCat(t.Name(), ": a chunk of ", bytes,
                                                   " bytes is not whole elements"));
  }
  const auto count = static_cast<std::int64_t>(bytes / t.element);
  if (offset != begin || offset + count > t.slice.offset + t.slice.count) {
    return absl::OutOfRangeError(absl::StrCat(
        t.Name(), ": chunk [", offset, ", ", offset + count, ") is outside this shard's slice [",
        t.slice.offset, ", ", t.slice.offset + t.slice.count, ") or out of order (expected offset ",
        begin, ")"));
  }
  store_.bytes_received_ += bytes;
  next_ += count;
  if (bytes == 0) return absl::OkStatus();
  for (const std::span<const std::byte> piece : pieces) {
    if (!piece.empty()) pieces_.push_back(piece);
  }
  owners_.push_back(std::move(owner));
  return absl::OkStatus();
}

absl::Status ParameterStore::PushSession::Commit() {
  Tensor& t = *tensor_;
  if (next_ != t.slice.count) {
    return absl::InvalidArgumentError(absl::StrCat(t.Name(), ": the push of step ", step_,
                                                   " covered ", next_, " of ", t.slice.count,
                                                   " elements"));
  }
  std::lock_guard lock(t.mu);
  if (step_ != t.completed + 1 || t.pushed[worker_]) {
    return absl::FailedPreconditionError(
        absl::StrCat(t.Name(), ": step ", step_, " closed while worker ", worker_, " pushed"));
  }
  if (t.pushes == 0) {
    // The step's first gradient is copied, not added to zeros: that saves
    // zeroing the sum after every step and a pass over it.
    std::byte* dst = t.sum.data();
    for (const std::span<const std::byte> piece : pieces_) {
      std::memcpy(dst, piece.data(), piece.size());
      dst += piece.size();
    }
  } else {
    switch (t.type) {
      case DataType::kFloat32: AddPiecesInto<float>(t.sum.data(), pieces_); break;
      case DataType::kFloat64: AddPiecesInto<double>(t.sum.data(), pieces_); break;
      case DataType::kInt32: AddPiecesInto<std::int32_t>(t.sum.data(), pieces_); break;
    }
  }
  pieces_.clear();
  owners_.clear();
  t.pushed[worker_] = true;
  if (++t.pushes < t.spec.workers()) return absl::OkStatus();

  const proto::Optimizer& opt = t.spec.optimizer();
  switch (t.type) {
    case DataType::kFloat32:
      Apply<float>(opt, step_, t.spec.workers(), t.sum, t.values, t.velocity, t.second);
      break;
    case DataType::kFloat64:
      Apply<double>(opt, step_, t.spec.workers(), t.sum, t.values, t.velocity, t.second);
      break;
    case DataType::kInt32:
      Apply<std::int32_t>(opt, step_, t.spec.workers(), t.sum, t.values, t.velocity, t.second);
      break;
  }
  std::fill(t.pushed.begin(), t.pushed.end(), false);
  t.pushes = 0;
  t.completed = step_;
  t.completed_cv.notify_all();
  return absl::OkStatus();
}

absl::Status ParameterStore::Pull(const std::string& name, std::uint64_t step,
                                  std::chrono::steady_clock::time_point deadline,
                                  std::size_t chunk_bytes, const EmitChunk& emit) {
  std::shared_ptr<Tensor> t = Find(name);
  if (!t) return absl::NotFoundError(absl::StrCat("no tensor '", name, "' on this shard"));
  std::unique_lock lock(t->mu);
  while (t->completed < step) {
    {
      std::lock_guard store_lock(mu_);
      if (shutdown_) return absl::UnavailableError("the parameter server is shutting down");
    }
    if (t->completed_cv.wait_until(lock, deadline) == std::cv_status::timeout &&
        t->completed < step) {
      std::vector<std::uint32_t> missing;
      for (std::uint32_t w = 0; w < t->pushed.size(); ++w) {
        if (!t->pushed[w]) missing.push_back(w);
      }
      std::string names;
      for (std::uint32_t w : missing) absl::StrAppend(&names, names.empty() ? "" : ", ", w);
      return absl::DeadlineExceededError(absl::StrCat(t->Name(), ": step ", step,
                                                      " did not complete; still waiting for "
                                                      "workers ", names));
    }
  }
  if (t->completed != step) {
    return absl::FailedPreconditionError(absl::StrCat(
        t->Name(), ": step ", step, " is gone; this shard holds step ", t->completed));
  }
  // Synchronous workers cannot complete another step while this one is being
  // pulled (see the file comment), so the values can be sent without the lock.
  lock.unlock();
  const std::size_t per_chunk = std::max<std::size_t>(t->element, chunk_bytes / t->element * t->element);
  const std::size_t total = t->bytes();
  for (std::size_t at = 0; at < total; at += per_chunk) {
    const std::size_t n = std::min(per_chunk, total - at);
    if (!emit(t->slice.offset + static_cast<std::int64_t>(at / t->element),
              std::span<const std::byte>(t->values.data() + at, n))) {
      return absl::CancelledError("the puller went away");
    }
    bytes_sent_ += n;
  }
  return absl::OkStatus();
}

}  // namespace testbed
