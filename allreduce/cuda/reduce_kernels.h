// The reduction on device memory: dst[i] = op(dst[i], src[i]), by a
// grid-stride kernel over the host loop's own functors
// (allreduce/reduce_functors.h; float16 through float, as on the host).
// C++17 and no CUDA headers, so both nvcc and the C++20 code that calls it
// include it.
#pragma once

#include <cstdint>

#include "allreduce/data_type.h"

namespace testbed::cuda {

// Launches the reduction on `stream` (a cudaStream_t; null: the default
// stream) and returns the launch's cudaError_t as an int (0: cudaSuccess).
// The reduction is complete once the stream is synchronized.
int LaunchReduce(DataType type, ReduceOp op, void* dst, const void* src, std::int64_t count,
                 void* stream);

}  // namespace testbed::cuda
