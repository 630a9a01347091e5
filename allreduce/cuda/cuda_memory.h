// CUDA's two kinds of memory, as MemoryOps (allreduce/memory.h):
//   pinned  page-locked host memory (cudaHostAlloc): host code may touch it,
//           the transports send it as host memory, and copies between it and
//           a device run at the bus's full speed (no bounce through pageable
//           pages) - what staging is made of;
//   cuda    device memory (cudaMalloc): only these operations touch it - the
//           reductions run on the GPU (allreduce/cuda/reduce_kernels.cu), and
//           transports without CUDA support stage it through host memory.
// Built only with TESTBED_CUDA (TESTBED_HAVE_CUDA); memory.cc is the one
// place that reaches for it.
//
// Errors from the CUDA runtime inside an operation (a device lost mid-run)
// throw std::runtime_error naming the call and the CUDA error; whether CUDA
// can be used at all is asked first, with DeviceStatus().
//
// Thread-safety: the operations are stateless; CUDA's current device is per
// thread (UseDevice).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "allreduce/memory.h"

namespace testbed::cuda {

const MemoryOps& PinnedMemoryOps();
const MemoryOps& DeviceMemoryOps();

// OK when this process can use a CUDA device; else UNAVAILABLE with the CUDA
// error's name and text (cudaErrorInsufficientDriver where there is no
// driver, cudaErrorNoDevice where there is no GPU).
absl::Status DeviceStatus();

// Makes device `rank` mod the number of devices current for this thread (the
// ranks of a machine share its GPUs round-robin); returns its index.
absl::StatusOr<int> UseDevice(int rank);

}  // namespace testbed::cuda
