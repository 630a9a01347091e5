#include "server/parameter_store.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "allreduce/chunking.h"
#include "common/byte_size.h"
#include "common/optimizer.h"

namespace testbed {

namespace {

using Bytes = std::vector<std::byte>;

// One worker's complete push of one step: pieces that together cover the
// slice in order, and the owners that keep their memory alive.
struct StagedPush {
  std::vector<std::span<const std::byte>> pieces;
  std::vector<std::shared_ptr<const void>> owners;
};

enum class ChunkState : std::uint8_t { kPending, kWorking, kDone };

}  // namespace

struct ParameterStore::Tensor {
  proto::TensorSpec spec;
  int shards = 1, shard = 0;
  Slice slice;
  DataType type = DataType::kFloat32;
  std::size_t element = 4;
  std::size_t chunk_elements = 1;  // per worked-out and pulled chunk

  std::mutex mu;
  // A step opened or completed, a chunk became ready or was worked out, a
  // push failed, or the shard shuts down.
  std::condition_variable changed_cv;
  std::uint64_t completed = 0;  // the last step every worker committed
  // The step whose values are served and worked out: `completed`, or
  // completed + 1 once every worker has joined it (its chunks are then worked
  // out as they become ready, while its pushes still arrive).
  std::uint64_t served = 0;

  // The pushes of step completed + 1, by worker.
  std::vector<bool> joined;           // BeginPush accepted it
  std::uint32_t joins = 0;            // how many are true
  std::vector<bool> pushed;           // its push committed
  std::uint32_t pushes = 0;           // how many are true
  std::vector<std::int64_t> staged;   // elements of the slice staged so far
  std::vector<StagedPush> open;       // the staged pieces, until the step is served
  // A step whose push broke off after the step was served (0: none): its
  // pulls and pushes fail with `failure`.
  std::uint64_t failed_step = 0;
  absl::Status failure;

  // The served step, worked out chunk by chunk.
  std::vector<StagedPush> gradients;     // its pushes, until every chunk is worked out
  std::vector<ChunkState> chunks;
  std::size_t chunks_pending = 0;        // not kDone
  std::size_t ready = 0;  // leading chunks every worker has staged (all, once complete)
  std::shared_ptr<Bytes> values;         // what pulls of `served` get
  std::shared_ptr<const Bytes> previous; // the values before it, where optimizers start
                                         // (unused, null, for NONE)
  std::vector<std::shared_ptr<Bytes>> spares;  // buffers for the next steps' values
  std::unique_ptr<Optimizer> optimizer;  // the rule, with this slice's state

  // Stale modes only (BOUNDED_STALENESS, ASYNCHRONOUS): pushes stage into
  // `open` and `staged`, `values` is the current version; the fields above
  // for served steps are unused.
  bool stale = false;
  std::uint64_t staleness = 0;       // k; the largest uint64 for ASYNCHRONOUS
  std::vector<std::uint64_t> clock;  // per worker: the last step it pushed completely
  std::vector<bool> pushing;         // a push of the worker's next step is under way
  bool applying = false;             // a thread is applying a push (one at a time)
  bool broken = false;               // a push broke off: all fail with `failure`

  // Stale modes: a pull of `step` by `puller` (if known) may take the values.
  bool StaleReady(std::uint64_t step, std::optional<std::uint32_t> puller) const {
    if (puller && clock[*puller] < step) return false;
    return step <= staleness || *std::min_element(clock.begin(), clock.end()) >= step - staleness;
  }
  // Stale modes: the workers a pull of `step` by `puller` still waits for.
  std::string WorkersBehind(std::uint64_t step, std::optional<std::uint32_t> puller) const {
    std::string names;
    for (std::size_t w = 0; w < clock.size(); ++w) {
      const bool own = puller && *puller == w;
      if ((own && clock[w] < step) || (step > staleness && clock[w] < step - staleness)) {
        absl::StrAppend(&names, names.empty() ? "" : ", ", w, " (at step ", clock[w], ")");
      }
    }
    return names;
  }

  std::size_t bytes() const { return static_cast<std::size_t>(slice.count) * element; }
  std::string Name() const { return absl::StrCat("tensor '", spec.name(), "'"); }
  // Elements [begin, end) of the slice form chunk `k`.
  std::int64_t ChunkBegin(std::size_t k) const {
    return static_cast<std::int64_t>(k * chunk_elements);
  }
  std::int64_t ChunkEnd(std::size_t k) const {
    return std::min<std::int64_t>(slice.count, ChunkBegin(k + 1));
  }
  // Chunk `k` of the served step can be worked out: every worker staged it.
  bool ChunkReady(std::size_t k) const { return served == completed || k < ready; }
  // How many leading chunks every worker of the open step has staged.
  std::size_t StagedChunks() const {
    const std::int64_t least = *std::min_element(staged.begin(), staged.end());
    if (least >= slice.count) return chunks.size();
    return static_cast<std::size_t>(least) / chunk_elements;
  }
  // The workers whose push has not reached element `end` of the slice.
  std::string WorkersShortOf(std::int64_t end) const {
    std::string names;
    for (std::size_t w = 0; w < staged.size(); ++w) {
      if (!joined[w] || staged[w] < end) absl::StrAppend(&names, names.empty() ? "" : ", ", w);
    }
    return names;
  }
  // Worker `w`'s push of the served step covered the slice; the last one
  // completes the step (so a worker that pulled all of it may push the next).
  void CountPush(std::uint32_t w) {
    pushed[w] = true;
    if (++pushes < spec.workers()) return;
    completed = served;
    ready = chunks.size();
    std::fill(joined.begin(), joined.end(), false);
    std::fill(pushed.begin(), pushed.end(), false);
    std::fill(staged.begin(), staged.end(), 0);
    joins = 0;
    pushes = 0;
    changed_cv.notify_all();
  }
  // Lets go of the served step's received memory, keeping a place per worker.
  void ReleaseGradients() {
    for (StagedPush& push : gradients) push = StagedPush{};
  }
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

// The pieces of `push` that hold bytes [begin, begin + size) of the slice.
void ClipPieces(const StagedPush& push, std::size_t begin, std::size_t size,
                std::vector<std::span<const std::byte>>& out) {
  out.clear();
  std::size_t at = 0;  // where the current piece starts in the slice
  for (const std::span<const std::byte> piece : push.pieces) {
    const std::size_t piece_end = at + piece.size();
    if (piece_end > begin && at < begin + size) {
      const std::size_t from = std::max(at, begin), to = std::min(piece_end, begin + size);
      out.push_back(piece.subspan(from - at, to - from));
    }
    if (piece_end >= begin + size) break;
    at = piece_end;
  }
}

// Reads a push's clipped pieces in order, across piece ends.
class PieceCursor {
 public:
  explicit PieceCursor(std::span<const std::span<const std::byte>> pieces) : pieces_(pieces) {}
  // Bytes left in the current piece, and where they start.
  std::size_t contiguous() const {
    return index_ < pieces_.size() ? pieces_[index_].size() - at_ : 0;
  }
  const std::byte* data() const { return pieces_[index_].data() + at_; }
  // Moves on `bytes`, at most contiguous().
  void Skip(std::size_t bytes) {
    at_ += bytes;
    if (index_ < pieces_.size() && at_ == pieces_[index_].size()) {
      ++index_;
      at_ = 0;
    }
  }
  // Copies the next `bytes` out, across piece ends.
  void Take(std::byte* out, std::size_t bytes) {
    while (bytes > 0) {
      const std::size_t n = std::min(bytes, contiguous());
      std::memcpy(out, data(), n);
      out += n;
      bytes -= n;
      Skip(n);
    }
  }

 private:
  std::span<const std::span<const std::byte>> pieces_;
  std::size_t index_ = 0, at_ = 0;
};

// out[i] = in[0][i] + in[1][i] + ... for n elements, in that order, a block
// at a time so the partial sums stay in L1 (one pass over each input and the
// output, instead of a copy and N-1 passes of read-add-write).
template <typename T>
void SumRun(T* out, std::span<const std::byte* const> in, std::size_t n) {
  constexpr std::size_t kBlock = 256;
  for (std::size_t i = 0; i < n; i += kBlock) {
    const std::size_t m = std::min(kBlock, n - i);
    std::memcpy(out + i, in[0] + i * sizeof(T), m * sizeof(T));
    for (std::size_t w = 1; w < in.size(); ++w) AddInto<T>(out + i, in[w] + i * sizeof(T), m);
  }
}

// Each worker's pieces of one chunk, in worker order (ClipPieces).
using ClippedPushes = std::vector<std::vector<std::span<const std::byte>>>;

// Sums `count` elements of every push into `g`, in worker order.
template <typename T>
void SumChunk(const ClippedPushes& clipped, std::size_t count, T* g) {
  std::vector<PieceCursor> cursors;
  for (const auto& pieces : clipped) cursors.emplace_back(pieces);
  std::vector<const std::byte*> from(clipped.size());
  std::size_t done = 0;
  while (done < count) {
    std::size_t run = count - done;  // elements every push holds contiguously
    for (const PieceCursor& c : cursors) run = std::min(run, c.contiguous() / sizeof(T));
    if (run == 0) {  // an element straddles two pieces of some push
      T sum{};
      for (std::size_t w = 0; w < cursors.size(); ++w) {
        std::byte bytes[sizeof(T)];
        cursors[w].Take(bytes, sizeof(T));
        T v;
        std::memcpy(&v, bytes, sizeof(T));
        sum = w == 0 ? v : static_cast<T>(sum + v);
      }
      g[done++] = sum;
      continue;
    }
    for (std::size_t w = 0; w < cursors.size(); ++w) from[w] = cursors[w].data();
    SumRun<T>(g + done, from, run);
    for (PieceCursor& c : cursors) c.Skip(run * sizeof(T));
    done += run;
  }
}

// Works out elements [begin, end) of a step's values: sums the gradients,
// averages them if asked, and applies the optimizer, starting from `prev`:
// one call for the chunk.
// `workers` is what `average` divides by: the pushes summed (sync mode), or
// all N workers when a push is applied on its own (the stale modes).
template <typename T>
void WorkOutChunk(Optimizer& optimizer, bool average, std::size_t divisor,
                  const ClippedPushes& pushes, std::int64_t begin, std::int64_t end,
                  const T* prev, T* w) {
  const std::int64_t n = end - begin;
  const auto workers = static_cast<T>(divisor);
  if (!optimizer.Updates()) {  // the aggregate itself, summed in place
    T* g = w + begin;
    SumChunk<T>(pushes, static_cast<std::size_t>(n), g);
    if (average) {
      for (std::int64_t i = 0; i < n; ++i) g[i] = static_cast<T>(g[i] / workers);
    }
    return;
  }
  if constexpr (std::is_floating_point_v<T>) {  // Declare keeps integers to aggregation
    std::vector<T> gradient(static_cast<std::size_t>(n));
    T* g = gradient.data();
    SumChunk<T>(pushes, static_cast<std::size_t>(n), g);
    if (average) {
      for (std::int64_t i = 0; i < n; ++i) g[i] = static_cast<T>(g[i] / workers);
    }
    optimizer.Apply(begin, std::span<const T>(gradient), prev + begin, w + begin);
  }
}

// A buffer for a step's values that nothing else references (a pull's
// lingering reference keeps its buffer out of use), reused when one is free.
std::shared_ptr<Bytes> TakeFreeBuffer(std::vector<std::shared_ptr<Bytes>>& spares,
                                      std::size_t bytes) {
  for (auto it = spares.begin(); it != spares.end(); ++it) {
    if (it->use_count() == 1) {
      std::shared_ptr<Bytes> free = std::move(*it);
      spares.erase(it);
      return free;
    }
  }
  return std::make_shared<Bytes>(bytes);
}

}  // namespace

std::int64_t DefaultMaxTensorBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::int64_t{8} << 30;
  return static_cast<std::int64_t>(pages) / 2 * page;
}

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
    tensor->changed_cv.notify_all();
  }
}

absl::StatusOr<ParameterStore::Slice> ParameterStore::Declare(const proto::TensorSpec& spec,
                                                              int shards, int shard) {
  const auto type = ParseDataType(spec.dtype());
  if (spec.name().empty()) return absl::InvalidArgumentError("a tensor needs a name");
  if (!type) return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", spec.dtype(), "'"));
  // Halves are a wire format here, not a storage type: the optimizers work
  // in float32 or float64, and a gradient travels as halves through a float32
  // tensor's FP16 push encoding.
  if (*type == DataType::kFloat16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", spec.name(),
        "': the parameter server holds float32, float64 or int32 tensors, not float16 "
        "(push a float32 tensor's gradients as halves with push encoding FP16)"));
  }
  if (spec.count() < 0 || spec.workers() < 1 || shards < 1 || shard < 0 || shard >= shards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad declaration of '", spec.name(), "': count ", spec.count(), ", workers ",
        spec.workers(), ", shard ", shard, " of ", shards));
  }
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(spec.optimizer());
  if (!optimizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", spec.name(), "': ", optimizer.status().message()));
  }
  if (*type == DataType::kInt32 && (*optimizer)->Updates()) {
    return absl::InvalidArgumentError("int32 tensors only aggregate (optimizer NONE)");
  }
  const proto::TensorSpec::PushEncoding encoding = spec.push_encoding();
  if (!proto::TensorSpec::PushEncoding_IsValid(encoding)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", spec.name(),
                                                   "': unknown push encoding ", encoding,
                                                   " (DENSE, FP16 or SPARSE)"));
  }
  if (encoding != proto::TensorSpec::DENSE && *type != DataType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", spec.name(), "': the ", proto::TensorSpec::PushEncoding_Name(encoding),
        " push encoding is for float32 tensors, not ", spec.dtype()));
  }
  const proto::TensorSpec::Consistency consistency = spec.consistency();
  if (!proto::TensorSpec::Consistency_IsValid(consistency)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", spec.name(), "': unknown consistency ", consistency));
  }
  if (spec.staleness() != 0 && consistency != proto::TensorSpec::BOUNDED_STALENESS) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", spec.name(), "': a staleness bound (", spec.staleness(),
        ") needs consistency BOUNDED_STALENESS, not ",
        proto::TensorSpec::Consistency_Name(consistency)));
  }
  const bool stale = consistency != proto::TensorSpec::SYNCHRONOUS;
  if (stale && !(*optimizer)->Updates()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", spec.name(), "': consistency ",
        proto::TensorSpec::Consistency_Name(consistency),
        " needs an optimizer that updates (sgd, momentum, adam): NONE serves one step's sum, "
        "which only synchronous steps have"));
  }
  // The slice is measured against the limit by division, so no count, however
  // large, overflows on the way; a whole tensor whose bytes do not fit 64 bits
  // is refused too (its byte offsets would overflow).
  const Chunk chunk = ChunkOf(spec.count(), shards, shard);
  const auto element = static_cast<std::int64_t>(ElementSize(*type));
  const std::string elements = absl::StrCat(std::string(Name(*type)), " elements");
  if (chunk.count > max_tensor_bytes_ / element) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tensor '", spec.name(), "': its slice of ", chunk.count, " ", elements, " (",
        HumanByteSize(static_cast<double>(chunk.count) * static_cast<double>(element)),
        ") exceeds this shard's limit of ", HumanByteSize(static_cast<double>(max_tensor_bytes_)),
        " per tensor (testbed-server --max-tensor-bytes)"));
  }
  if (spec.count() > std::numeric_limits<std::int64_t>::max() / element) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", spec.name(), "': ", spec.count(),
                                                   " ", elements,
                                                   " are more bytes than 64 bits can count"));
  }
  const std::int64_t slice_bytes = chunk.count * element;
  std::lock_guard lock(mu_);
  if (auto it = tensors_.find(spec.name()); it != tensors_.end()) {
    const Tensor& t = *it->second;
    if (!SameDeclaration(t.spec, spec) || t.shards != shards || t.shard != shard) {
      return absl::AlreadyExistsError(
          absl::StrCat(t.Name(), " is already declared differently on this shard"));
    }
    return t.slice;
  }
  if (static_cast<std::int64_t>(tensors_.size()) >= max_tensors_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("tensor '", spec.name(), "': this shard already holds ", tensors_.size(),
                     " tensors, its limit (testbed-server --max-tensors); forget some first"));
  }
  if (slice_bytes > max_total_bytes_ - declared_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tensor '", spec.name(), "': its slice of ", HumanByteSize(static_cast<double>(slice_bytes)),
        " with the ", HumanByteSize(static_cast<double>(declared_bytes_)),
        " already declared exceeds this shard's limit of ",
        HumanByteSize(static_cast<double>(max_total_bytes_)),
        " for all tensors (testbed-server --max-total-tensor-bytes)"));
  }
  auto t = std::make_shared<Tensor>();
  t->spec = spec;
  t->shards = shards;
  t->shard = shard;
  t->slice = {chunk.offset, chunk.count};
  t->type = *type;
  t->element = ElementSize(*type);
  t->joined.assign(spec.workers(), false);
  t->pushed.assign(spec.workers(), false);
  t->staged.assign(spec.workers(), 0);
  t->open.resize(spec.workers());
  t->gradients.resize(spec.workers());
  t->chunk_elements = std::max<std::size_t>(1, chunk_bytes_ / t->element);
  // Step 0 is served: all zeros, every chunk worked out. Its buffer and a
  // spare for step 1 are touched now, not during the first timed step.
  t->values = std::make_shared<Bytes>(t->bytes());
  if ((*optimizer)->Updates() && !stale) {  // only sync optimizers start from it
    t->previous = std::make_shared<const Bytes>(t->bytes());
  }
  t->spares.push_back(std::make_shared<Bytes>(t->bytes()));
  const std::size_t chunks =
      (static_cast<std::size_t>(chunk.count) + t->chunk_elements - 1) / t->chunk_elements;
  t->chunks.assign(chunks, ChunkState::kDone);
  t->optimizer = *std::move(optimizer);
  t->optimizer->Prepare(chunk.count);
  if (stale) {
    t->stale = true;
    t->staleness = consistency == proto::TensorSpec::ASYNCHRONOUS
                       ? std::numeric_limits<std::uint64_t>::max()
                       : spec.staleness();
    t->clock.assign(spec.workers(), 0);
    t->pushing.assign(spec.workers(), false);
  }
  tensors_[spec.name()] = t;
  declared_bytes_ += slice_bytes;
  return t->slice;
}

void ParameterStore::Forget(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return;
  declared_bytes_ -= static_cast<std::int64_t>(it->second->bytes());
  tensors_.erase(it);
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

// Every worker has joined step completed + 1: by the synchronous protocol
// each has pulled the previous step, so its values may be replaced. Finishes
// the previous step (for clients that push without pulling), then serves the
// open one, whose chunks are worked out as they become ready.
void ParameterStore::ServeOpenStep(Tensor& t, std::unique_lock<std::mutex>& lock) {
  // The optimizers start from the previous values, so they must be whole.
  for (std::size_t k = 0; k < t.chunks.size(); ++k) WorkOut(t, k, lock);
  t.optimizer->BeginStep();  // no chunk is being worked out: none is pending
  if (!t.optimizer->Updates()) {
    t.spares.push_back(std::move(t.values));  // nothing starts from the old sum
  } else {
    auto old = std::const_pointer_cast<Bytes>(std::move(t.previous));
    t.spares.push_back(std::move(old));
    t.previous = std::move(t.values);
  }
  t.values = TakeFreeBuffer(t.spares, t.bytes());
  while (t.spares.size() > 2) {  // let go of buffers pulls still hold first
    auto held = std::find_if(t.spares.begin(), t.spares.end(),
                             [](const auto& b) { return b.use_count() > 1; });
    t.spares.erase(held != t.spares.end() ? held : t.spares.begin());
  }
  // From now on pushes stage into `gradients` directly.
  t.gradients.swap(t.open);
  t.open.assign(t.spec.workers(), StagedPush{});
  t.chunks.assign(t.chunks.size(), ChunkState::kPending);
  t.chunks_pending = t.chunks.size();
  if (t.chunks.empty()) t.ReleaseGradients();
  t.served = t.completed + 1;
  t.ready = t.StagedChunks();
  t.changed_cv.notify_all();
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

// Works out chunk `k` of the served step, or waits while another thread does;
// the chunk must be ready. `lock` holds t.mu; it is released while the chunk
// is summed.
void ParameterStore::WorkOut(Tensor& t, std::size_t k, std::unique_lock<std::mutex>& lock) {
  while (t.chunks[k] == ChunkState::kWorking) t.changed_cv.wait(lock);
  if (t.chunks[k] == ChunkState::kDone) return;
  t.chunks[k] = ChunkState::kWorking;
  const std::int64_t begin = t.ChunkBegin(k), end = t.ChunkEnd(k);
  // Pushes may still append pieces (of later chunks) to the gradients, so
  // this chunk's pieces are taken now; the owners keep their memory alive,
  // and the served step cannot change while a chunk of it is pending.
  ClippedPushes pushes(t.gradients.size());
  for (std::size_t w = 0; w < t.gradients.size(); ++w) {
    ClipPieces(t.gradients[w], static_cast<std::size_t>(begin) * t.element,
               static_cast<std::size_t>(end - begin) * t.element, pushes[w]);
  }
  std::byte* values = t.values->data();
  const std::byte* previous = t.previous ? t.previous->data() : nullptr;
  lock.unlock();
  Optimizer& optimizer = *t.optimizer;
  const bool average = t.spec.optimizer().average();
  switch (t.type) {
    case DataType::kFloat32:
      WorkOutChunk<float>(optimizer, average, pushes.size(), pushes, begin, end,
                          reinterpret_cast<const float*>(previous),
                          reinterpret_cast<float*>(values));
      break;
    case DataType::kFloat64:
      WorkOutChunk<double>(optimizer, average, pushes.size(), pushes, begin, end,
                           reinterpret_cast<const double*>(previous),
                           reinterpret_cast<double*>(values));
      break;
    case DataType::kInt32:
      WorkOutChunk<std::int32_t>(optimizer, average, pushes.size(), pushes, begin, end,
                                 reinterpret_cast<const std::int32_t*>(previous),
                                 reinterpret_cast<std::int32_t*>(values));
      break;
    case DataType::kFloat16:  // refused at Declare
      break;
  }
  lock.lock();
  t.chunks[k] = ChunkState::kDone;
  if (--t.chunks_pending == 0) t.ReleaseGradients();  // the received memory goes back
  t.changed_cv.notify_all();
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

void ParameterStore::ApplyPush(Tensor& t, std::uint32_t w, std::uint64_t step,
                               std::unique_lock<std::mutex>& lock) {
  // One at a time: the optimizer's state and the values change in the order
  // pushes complete.
  while (t.applying) t.changed_cv.wait(lock);
  t.applying = true;
  const StagedPush push = std::move(t.open[w]);
  t.open[w] = StagedPush{};
  const std::shared_ptr<const Bytes> from = t.values;  // pulls may still be sending it
  std::shared_ptr<Bytes> to = TakeFreeBuffer(t.spares, t.bytes());
  lock.unlock();
  Optimizer& optimizer = *t.optimizer;
  optimizer.BeginStep();
  const bool average = t.spec.optimizer().average();
  const std::size_t workers = t.spec.workers();
  ClippedPushes pushes(1);
  for (std::size_t k = 0; k < t.chunks.size(); ++k) {
    const std::int64_t begin = t.ChunkBegin(k), end = t.ChunkEnd(k);
    ClipPieces(push, static_cast<std::size_t>(begin) * t.element,
               static_cast<std::size_t>(end - begin) * t.element, pushes[0]);
    switch (t.type) {
      case DataType::kFloat32:
        WorkOutChunk<float>(optimizer, average, workers, pushes, begin, end,
                            reinterpret_cast<const float*>(from->data()),
                            reinterpret_cast<float*>(to->data()));
        break;
      case DataType::kFloat64:
        WorkOutChunk<double>(optimizer, average, workers, pushes, begin, end,
                             reinterpret_cast<const double*>(from->data()),
                             reinterpret_cast<double*>(to->data()));
        break;
      case DataType::kInt32:  // refused at Declare: stale modes need an optimizer
      case DataType::kFloat16:  // refused at Declare
        break;
    }
  }
  lock.lock();
  t.spares.push_back(std::const_pointer_cast<Bytes>(std::move(t.values)));
  t.values = std::move(to);
  while (t.spares.size() > 2) {  // let go of buffers pulls still hold first
    auto held = std::find_if(t.spares.begin(), t.spares.end(),
                             [](const auto& b) { return b.use_count() > 1; });
    t.spares.erase(held != t.spares.end() ? held : t.spares.begin());
  }
  t.clock[w] = step;
  t.pushing[w] = false;
  t.staged[w] = 0;
  t.applying = false;
  t.changed_cv.notify_all();
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
