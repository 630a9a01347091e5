#include "allreduce/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#if TESTBED_HAVE_CUDA
#include "allreduce/cuda/cuda_memory.h"
#endif

namespace testbed {
namespace {

class HostMemory final : public MemoryOps {
 public:
  MemoryType type() const override { return MemoryType::kHost; }
  Allocation Allocate(std::size_t bytes) const override {
    auto* data = static_cast<std::byte*>(std::calloc(bytes == 0 ? 1 : bytes, 1));
    if (data == nullptr) throw std::bad_alloc();
    return MakeAllocation(data, bytes, MemoryType::kHost, [](std::byte* p, std::size_t) {
      std::free(p);
    });
  }
  void Copy(MutableBuffer dst, ConstBuffer src) const override {
    if (src.size > 0) std::memcpy(dst.data, src.data, src.size);
  }
  void Reduce(DataType type, ReduceOp op, MutableBuffer dst, ConstBuffer src,
              std::int64_t count) const override {
    ReduceInto(type, op, dst.data, src.data, count);
  }
  void Upload(MutableBuffer dst, std::span<const std::byte> host) const override {
    Copy(dst, host);
  }
  void Download(std::span<std::byte> host, ConstBuffer src) const override {
    if (src.size > 0) std::memcpy(host.data(), src.data, src.size);
  }
};

// Pages no code may touch except these operations, which open the pages they
// work on for the length of the operation. A fake "device" pointer is a host
// address, so the operations are host code; what they prove is that nothing
// else touches it.
class FakeDeviceMemory final : public MemoryOps {
 public:
  MemoryType type() const override { return MemoryType::kFakeDevice; }
  Allocation Allocate(std::size_t bytes) const override {
    const std::size_t mapped = RoundUp(bytes == 0 ? 1 : bytes);
    void* p = mmap(nullptr, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return MakeAllocation(static_cast<std::byte*>(p), bytes, MemoryType::kFakeDevice,
                          [](std::byte* q, std::size_t size) {
                            munmap(q, RoundUp(size == 0 ? 1 : size));
                          });
  }
  void Copy(MutableBuffer dst, ConstBuffer src) const override {
    if (src.size == 0) return;
    const Open a(dst.data, dst.size), b(src.data, src.size);
    std::memmove(dst.data, src.data, src.size);
  }
  void Reduce(DataType type, ReduceOp op, MutableBuffer dst, ConstBuffer src,
              std::int64_t count) const override {
    if (count == 0) return;
    const Open a(dst.data, dst.size), b(src.data, src.size);
    ReduceInto(type, op, dst.data, src.data, count);
  }
  void Upload(MutableBuffer dst, std::span<const std::byte> host) const override {
    if (host.empty()) return;
    const Open a(dst.data, dst.size);
    std::memcpy(dst.data, host.data(), host.size());
  }
  void Download(std::span<std::byte> host, ConstBuffer src) const override {
    if (src.size == 0) return;
    const Open a(src.data, src.size);
    std::memcpy(host.data(), src.data, src.size);
  }

 private:
  static std::size_t Page() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }
  static std::size_t RoundUp(std::size_t bytes) { return (bytes + Page() - 1) / Page() * Page(); }

  // Opens the pages of [data, data + size) for the scope's length. Ranks of
  // the in-process transport run on threads and read each other's memory
  // (naive: N-1 peers read one rank's vector at once), so the pages are
  // counted: a page closes when its last user leaves.
  class Open {
   public:
    Open(const std::byte* data, std::size_t size) {
      if (size == 0) return;
      first_ = reinterpret_cast<std::uintptr_t>(data) / Page();
      last_ = (reinterpret_cast<std::uintptr_t>(data) + size - 1) / Page();
      std::lock_guard lock(Mutex());
      for (std::uintptr_t page = first_; page <= last_; ++page) {
        if (Users()[page]++ == 0) Protect(page, PROT_READ | PROT_WRITE);
      }
    }
    ~Open() {
      if (last_ < first_) return;
      std::lock_guard lock(Mutex());
      for (std::uintptr_t page = first_; page <= last_; ++page) {
        auto it = Users().find(page);
        if (--it->second == 0) {
          Protect(page, PROT_NONE);
          Users().erase(it);
        }
      }
    }
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;

   private:
    static void Protect(std::uintptr_t page, int protection) {
      mprotect(reinterpret_cast<void*>(page * Page()), Page(), protection);
    }
    static std::mutex& Mutex() {
      static std::mutex mu;
      return mu;
    }
    static std::unordered_map<std::uintptr_t, int>& Users() {
      static std::unordered_map<std::uintptr_t, int> users;
      return users;
    }

    std::uintptr_t first_ = 1, last_ = 0;  // pages; empty when last_ < first_
  };
};

}  // namespace

constexpr MemoryType kEveryMemoryType[] = {MemoryType::kHost, MemoryType::kPinned,
                                           MemoryType::kCuda, MemoryType::kFakeDevice};

std::string_view Name(MemoryType type) {
  switch (type) {
    case MemoryType::kHost: return "host";
    case MemoryType::kPinned: return "pinned";
    case MemoryType::kCuda: return "cuda";
    case MemoryType::kFakeDevice: return "fake-device";
  }
  return "?";
}

std::optional<MemoryType> ParseMemoryType(std::string_view name) {
  for (MemoryType type : kEveryMemoryType) {
    if (Name(type) == name) return type;
  }
  return std::nullopt;
}

std::string MemoryTypeNames() {
  std::string names;
  for (MemoryType type : kEveryMemoryType) {
    if (!names.empty()) names += ", ";
    names += Name(type);
  }
  return names;
}

bool HostAccessible(MemoryType type) {
  return type == MemoryType::kHost || type == MemoryType::kPinned;
}

absl::Status MemoryUsable(MemoryType type) {
  if (type == MemoryType::kHost || type == MemoryType::kFakeDevice) return absl::OkStatus();
#if TESTBED_HAVE_CUDA
  return cuda::DeviceStatus();
#else
  return absl::FailedPreconditionError(
      std::string(Name(type)) +
      " memory needs CUDA, and this build has none: nvcc was not found when it was configured "
      "(TESTBED_CUDA=AUTO); build on a machine with the CUDA toolkit, or with -DTESTBED_CUDA=ON");
#endif
}

void CopyAcross(MutableBuffer dst, ConstBuffer src) {
  if (src.size == 0) return;
  if (dst.memory == src.memory) {
    MemoryOpsFor(dst.memory).Copy(dst, src);
  } else if (src.memory == MemoryType::kHost) {
    MemoryOpsFor(dst.memory).Upload(dst, std::span(src.data, src.size));
  } else if (dst.memory == MemoryType::kHost) {
    MemoryOpsFor(src.memory).Download(std::span(dst.data, dst.size), src);
  } else {
    std::vector<std::byte> host(src.size);
    MemoryOpsFor(src.memory).Download(host, src);
    MemoryOpsFor(dst.memory).Upload(dst, host);
  }
}

absl::Status UseMemory(MemoryType type, int rank) {
  if (absl::Status st = MemoryUsable(type); !st.ok()) return st;
#if TESTBED_HAVE_CUDA
  if (type == MemoryType::kPinned || type == MemoryType::kCuda) {
    return cuda::UseDevice(rank).status();
  }
#endif
  return absl::OkStatus();
}

const MemoryOps& MemoryOpsFor(MemoryType type) {
  static const HostMemory host;
  static const FakeDeviceMemory fake_device;
  switch (type) {
    case MemoryType::kHost: return host;
    case MemoryType::kFakeDevice: return fake_device;
    case MemoryType::kPinned:
    case MemoryType::kCuda:
#if TESTBED_HAVE_CUDA
      return type == MemoryType::kPinned ? cuda::PinnedMemoryOps() : cuda::DeviceMemoryOps();
#else
      break;
#endif
  }
  std::fprintf(stderr, "fatal: %s memory asked for without MemoryUsable: %s\n",
               std::string(Name(type)).c_str(), std::string(MemoryUsable(type).message()).c_str());
  std::abort();
}

}  // namespace testbed
