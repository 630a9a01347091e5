// The element-wise reductions, written once for the host loop
// (data_type.cc) and the CUDA kernels (allreduce/cuda/reduce_kernels.cu), so
// the same schedule gives bit-identical results in host and device memory.
// C++17, since nvcc compiles it too.
//
// min and max are std::min's and std::max's own expressions, so a NaN
// compares as they make it: min(a, NaN) and max(a, NaN) keep a, min(NaN, b)
// and max(NaN, b) keep the NaN.
#pragma once

#if defined(__CUDACC__)
#define TESTBED_HOST_DEVICE __host__ __device__
#else
#define TESTBED_HOST_DEVICE
#endif

namespace testbed::reduce {

struct Sum {
  template <typename T>
  TESTBED_HOST_DEVICE T operator()(T a, T b) const {
    return a + b;
  }
};

struct Min {
  template <typename T>
  TESTBED_HOST_DEVICE T operator()(T a, T b) const {
    return (b < a) ? b : a;
  }
};

struct Max {
  template <typename T>
  TESTBED_HOST_DEVICE T operator()(T a, T b) const {
    return (a < b) ? b : a;
  }
};

}  // namespace testbed::reduce
