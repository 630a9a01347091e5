#include "allreduce/cuda/cuda_memory.h"

#include <cuda_runtime.h>

#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "allreduce/cuda/reduce_kernels.h"

namespace testbed::cuda {
namespace {

std::string Describe(cudaError_t error) {
  return absl::StrCat(cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
}

void Check(cudaError_t error, const char* call) {
  if (error != cudaSuccess) throw std::runtime_error(absl::StrCat(call, ": ", Describe(error)));
}

class PinnedMemory final : public MemoryOps {
 public:
  MemoryType type() const override { return MemoryType::kPinned; }
  Allocation Allocate(std::size_t bytes) const override {
    void* p = nullptr;
    // Portable: pinned for every device of the process, not only the current one.
    Check(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable), "cudaHostAlloc");
    std::memset(p, 0, bytes);
    return MakeAllocation(static_cast<std::byte*>(p), bytes, MemoryType::kPinned,
                          [](std::byte* q, std::size_t) { cudaFreeHost(q); });
  }
  // Host code may touch it: everything but its allocation is host memory's.
  void Copy(MutableBuffer dst, ConstBuffer src) const override { Host().Copy(dst, src); }
  void Reduce(DataType type, ReduceOp op, MutableBuffer dst, ConstBuffer src,
              std::int64_t count) const override {
    Host().Reduce(type, op, dst, src, count);
  }
  void Upload(MutableBuffer dst, std::span<const std::byte> host) const override {
    Host().Upload(dst, host);
  }
  void Download(std::span<std::byte> host, ConstBuffer src) const override {
    Host().Download(host, src);
  }

 private:
  static const MemoryOps& Host() { return MemoryOpsFor(MemoryType::kHost); }
};

class DeviceMemory final : public MemoryOps {
 public:
  MemoryType type() const override { return MemoryType::kCuda; }
  Allocation Allocate(std::size_t bytes) const override {
    void* p = nullptr;
    Check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc");
    Check(cudaMemset(p, 0, bytes), "cudaMemset");
    return MakeAllocation(static_cast<std::byte*>(p), bytes, MemoryType::kCuda,
                          [](std::byte* q, std::size_t) { cudaFree(q); });
  }
  void Copy(MutableBuffer dst, ConstBuffer src) const override {
    if (src.size > 0) {
      Check(cudaMemcpy(dst.data, src.data, src.size, cudaMemcpyDeviceToDevice), "cudaMemcpy");
    }
  }
  void Reduce(DataType type, ReduceOp op, MutableBuffer dst, ConstBuffer src,
              std::int64_t count) const override {
    if (count == 0) return;
    Check(static_cast<cudaError_t>(LaunchReduce(type, op, dst.data, src.data, count, nullptr)),
          "the reduction kernel's launch");
    // The executor reads or sends the result next: it must be there.
    Check(cudaStreamSynchronize(nullptr), "the reduction kernel");
  }
  void Upload(MutableBuffer dst, std::span<const std::byte> host) const override {
    if (!host.empty()) {
      Check(cudaMemcpy(dst.data, host.data(), host.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
    }
  }
  void Download(std::span<std::byte> host, ConstBuffer src) const override {
    if (src.size > 0) {
      Check(cudaMemcpy(host.data(), src.data, src.size, cudaMemcpyDeviceToHost), "cudaMemcpy");
    }
  }
};

}  // namespace

const MemoryOps& PinnedMemoryOps() {
  static const PinnedMemory pinned;
  return pinned;
}

const MemoryOps& DeviceMemoryOps() {
  static const DeviceMemory device;
  return device;
}

absl::Status DeviceStatus() {
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess) {
    return absl::UnavailableError(absl::StrCat("no CUDA device: ", Describe(error)));
  }
  if (devices == 0) return absl::UnavailableError("no CUDA device: the driver sees none");
  return absl::OkStatus();
}

absl::StatusOr<int> UseDevice(int rank) {
  if (absl::Status st = DeviceStatus(); !st.ok()) return st;
  int devices = 0;
  cudaGetDeviceCount(&devices);
  const int device = rank % devices;
  if (const cudaError_t error = cudaSetDevice(device); error != cudaSuccess) {
    return absl::UnavailableError(absl::StrCat("cudaSetDevice(", device, "): ", Describe(error)));
  }
  return device;
}

}  // namespace testbed::cuda
