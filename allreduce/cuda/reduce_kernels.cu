#include "allreduce/cuda/reduce_kernels.h"

#include <cuda_runtime.h>

#include "allreduce/reduce_functors.h"

namespace testbed::cuda {
namespace {

// Each thread walks the buffer with the whole grid's stride, so any count
// fits a grid of bounded size.
template <typename T, typename Op>
__global__ void ReduceKernel(T* dst, const T* src, std::int64_t count) {
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    dst[i] = Op()(dst[i], src[i]);
  }
}

template <typename T, typename Op>
cudaError_t Launch(void* dst, const void* src, std::int64_t count, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr std::int64_t kMaxBlocks = 4096;  // enough to fill an H200 several times over
  const std::int64_t wanted = (count + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
  ReduceKernel<T, Op><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(dst),
                                                        static_cast<const T*>(src), count);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchTyped(ReduceOp op, void* dst, const void* src, std::int64_t count,
                        cudaStream_t stream) {
  switch (op) {
    case ReduceOp::kSum: return Launch<T, reduce::Sum>(dst, src, count, stream);
    case ReduceOp::kMin: return Launch<T, reduce::Min>(dst, src, count, stream);
    case ReduceOp::kMax: return Launch<T, reduce::Max>(dst, src, count, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

int LaunchReduce(DataType type, ReduceOp op, void* dst, const void* src, std::int64_t count,
                 void* stream) {
  if (count <= 0) return cudaSuccess;
  const auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case DataType::kFloat32: return LaunchTyped<float>(op, dst, src, count, s);
    case DataType::kFloat64: return LaunchTyped<double>(op, dst, src, count, s);
    case DataType::kInt32: return LaunchTyped<std::int32_t>(op, dst, src, count, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace testbed::cuda
