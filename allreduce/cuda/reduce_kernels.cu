#include "allreduce/cuda/reduce_kernels.h"

#include <cuda_fp16.h>
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

// float16 as the host loop does it (data_type.h): widen both to float,
// combine with the same functor, round back to nearest even. __float2half_rn
// turns any NaN into 0x7fff, as the host does.
template <typename Op>
__global__ void ReduceHalfKernel(__half* dst, const __half* src, std::int64_t count) {
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    dst[i] = __float2half_rn(Op()(__half2float(dst[i]), __half2float(src[i])));
  }
}

int BlocksFor(std::int64_t count, int threads) {
  constexpr std::int64_t kMaxBlocks = 4096;  // enough to fill an H200 several times over
  const std::int64_t wanted = (count + threads - 1) / threads;
  return static_cast<int>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
}

constexpr int kThreads = 256;

template <typename T, typename Op>
cudaError_t Launch(void* dst, const void* src, std::int64_t count, cudaStream_t stream) {
  ReduceKernel<T, Op><<<BlocksFor(count, kThreads), kThreads, 0, stream>>>(
      static_cast<T*>(dst), static_cast<const T*>(src), count);
  return cudaGetLastError();
}

template <typename Op>
cudaError_t LaunchHalf(void* dst, const void* src, std::int64_t count, cudaStream_t stream) {
  ReduceHalfKernel<Op><<<BlocksFor(count, kThreads), kThreads, 0, stream>>>(
      static_cast<__half*>(dst), static_cast<const __half*>(src), count);
  return cudaGetLastError();
}

cudaError_t LaunchHalfTyped(ReduceOp op, void* dst, const void* src, std::int64_t count,
                            cudaStream_t stream) {
  switch (op) {
    case ReduceOp::kSum: return LaunchHalf<reduce::Sum>(dst, src, count, stream);
    case ReduceOp::kMin: return LaunchHalf<reduce::Min>(dst, src, count, stream);
    case ReduceOp::kMax: return LaunchHalf<reduce::Max>(dst, src, count, stream);
  }
  return cudaErrorInvalidValue;
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
    case DataType::kFloat16: return LaunchHalfTyped(op, dst, src, count, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace testbed::cuda
