// Working out a parameter-server tensor's values: the N staged pushes of a
// chunk summed in worker order (bit-identical whatever the arrival order or
// chunking), averaged where asked and put through the optimizer; the sync
// step's chunks (WorkOut, ServeOpenStep) and the stale modes' pushes applied
// one at a time (ApplyPush), with the value buffers they rotate through.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "server/parameter_store.h"
#include "server/parameter_store_tensor.h"

namespace testbed {

namespace {

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

}  // namespace testbed
