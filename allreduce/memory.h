// Memory as a value (tensorpipe's habit): a buffer says where it lives, and
// each kind of memory brings its own allocator, copy and reduction. The
// executor and the transports ask the buffer and the memory's operations;
// none of them assumes host memory.
//
// Kinds:
//   host         ordinary pageable memory
//   pinned       page-locked host memory from CUDA (cudaHostAlloc)
//   cuda         GPU memory (cudaMalloc); its reductions run on the GPU
//   fake-device  host pages that are inaccessible (PROT_NONE) except inside
//                its own operations: a test that runs a collective on it
//                crashes if any code outside the memory's operations - the
//                executor, a transport - reads or writes the bytes directly,
//                as host code touching a GPU pointer would. It stands in for
//                device memory where there is no GPU.
// pinned and cuda exist only in builds with CUDA (TESTBED_CUDA; their
// operations in allreduce/cuda/); MemoryUsable says whether a kind can be
// used here, before anything is allocated.
//
// Thread-safety: MemoryOps are stateless and thread-safe; an Allocation is a
// value owned by one holder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "allreduce/data_type.h"

namespace testbed {

enum class MemoryType { kHost, kPinned, kCuda, kFakeDevice };

std::string_view Name(MemoryType type);
std::optional<MemoryType> ParseMemoryType(std::string_view name);
// Every kind's name, for --help and errors.
std::string MemoryTypeNames();

// Whether host code (a transport's send and receive, memcpy) may touch the
// bytes directly: host and pinned memory.
bool HostAccessible(MemoryType type);

// OK when memory of `type` can be used in this process; else why not, in one
// line: FAILED_PRECONDITION for a build without CUDA, UNAVAILABLE (with the
// CUDA error) for a machine without a usable GPU.
absl::Status MemoryUsable(MemoryType type);

// MemoryUsable, and for CUDA memory the device of `rank` (rank mod the
// devices) made current on the calling thread, which then allocates and
// reduces there.
absl::Status UseMemory(MemoryType type, int rank);

// A read-only view of memory and where it lives.
struct ConstBuffer {
  const std::byte* data = nullptr;
  std::size_t size = 0;
  MemoryType memory = MemoryType::kHost;

  ConstBuffer() = default;
  ConstBuffer(const std::byte* d, std::size_t s, MemoryType m) : data(d), size(s), memory(m) {}
  // Host memory, from any byte span.
  template <std::size_t Extent>
  ConstBuffer(std::span<const std::byte, Extent> host)  // NOLINT: implicit on purpose
      : data(host.data()), size(host.size()) {}
  ConstBuffer(const std::vector<std::byte>& host)  // NOLINT
      : data(host.data()), size(host.size()) {}

  ConstBuffer subspan(std::size_t offset, std::size_t bytes) const {
    return {data + offset, bytes, memory};
  }
  bool empty() const { return size == 0; }
};

// A writable view of memory and where it lives.
struct MutableBuffer {
  std::byte* data = nullptr;
  std::size_t size = 0;
  MemoryType memory = MemoryType::kHost;

  MutableBuffer() = default;
  MutableBuffer(std::byte* d, std::size_t s, MemoryType m) : data(d), size(s), memory(m) {}
  template <std::size_t Extent>
  MutableBuffer(std::span<std::byte, Extent> host)  // NOLINT: implicit on purpose
      : data(host.data()), size(host.size()) {}
  MutableBuffer(std::vector<std::byte>& host)  // NOLINT
      : data(host.data()), size(host.size()) {}

  MutableBuffer subspan(std::size_t offset, std::size_t bytes) const {
    return {data + offset, bytes, memory};
  }
  operator ConstBuffer() const { return {data, size, memory}; }  // NOLINT
  bool empty() const { return size == 0; }
};

// Memory of one kind, owned: freed by its kind's allocator.
class Allocation {
 public:
  Allocation() = default;
  MutableBuffer buffer() const { return {data_.get(), size_, memory_}; }
  std::size_t size() const { return size_; }

 private:
  friend class MemoryOps;
  using Deleter = void (*)(std::byte*, std::size_t);
  struct Free {
    std::size_t size;
    Deleter deleter;
    void operator()(std::byte* p) const { deleter(p, size); }
  };
  Allocation(std::byte* data, std::size_t size, MemoryType memory, Deleter deleter)
      : data_(data, Free{size, deleter}), size_(size), memory_(memory) {}

  std::unique_ptr<std::byte, Free> data_{nullptr, Free{0, nullptr}};
  std::size_t size_ = 0;
  MemoryType memory_ = MemoryType::kHost;
};

// What the executor and transports may do with memory of one kind. Copies
// and reductions take buffers of this kind on both sides; Upload and
// Download cross to and from host memory (staging, filling inputs, checking
// results).
class MemoryOps {
 public:
  virtual ~MemoryOps() = default;
  virtual MemoryType type() const = 0;

  // `bytes` of this kind, zeroed (so every page is touched now, not in a
  // timed loop).
  virtual Allocation Allocate(std::size_t bytes) const = 0;
  virtual void Copy(MutableBuffer dst, ConstBuffer src) const = 0;
  // dst[i] = op(dst[i], src[i]) for `count` elements of `type`.
  virtual void Reduce(DataType type, ReduceOp op, MutableBuffer dst, ConstBuffer src,
                      std::int64_t count) const = 0;
  virtual void Upload(MutableBuffer dst, std::span<const std::byte> host) const = 0;
  virtual void Download(std::span<std::byte> host, ConstBuffer src) const = 0;

 protected:
  static Allocation MakeAllocation(std::byte* data, std::size_t size, MemoryType memory,
                                   Allocation::Deleter deleter) {
    return Allocation(data, size, memory, deleter);
  }
};

// The operations of `type`'s memory; one place switches on the kind. `type`
// must be usable (MemoryUsable): asking for CUDA memory in a build without it
// ends the process with a message, as a bug would.
const MemoryOps& MemoryOpsFor(MemoryType type);

// dst = src, whatever kinds each lives in (through host memory when neither
// is host and they differ). dst.size must equal src.size.
void CopyAcross(MutableBuffer dst, ConstBuffer src);

}  // namespace testbed
