// testbed-gpu-probe: the facts experiments/gpu/check.sh needs beside the
// testbed's own rows, from the same CUDA runtime the testbed links.
//
//   testbed-gpu-probe devices   the CUDA devices, driver and runtime versions;
//                               exits 3 naming the CUDA error where there is
//                               no usable GPU (cudaErrorInsufficientDriver
//                               on a machine without a driver)
//   testbed-gpu-probe ucx       the memory types UCX reports
//                               (ucp_context_query): the runtime gate of
//                               --gpu-path direct
//   testbed-gpu-probe memcpy    cudaMemcpy bandwidth host<->device, pageable
//                               and pinned, 4 KiB to 256 MiB, as JSON lines
//
// One process, one thread; output on stdout, errors on stderr.
#include <cuda_runtime.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// "cudaErrorInsufficientDriver (35): CUDA driver version is insufficient..."
std::string CudaError(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + " (" + std::to_string(static_cast<int>(error)) +
         "): " + cudaGetErrorString(error);
}

// Exits with 3 and the failed call's name and error, the way check.sh reports it.
void Check(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return;
  std::fprintf(stderr, "testbed-gpu-probe: %s failed: %s\n", call, CudaError(error).c_str());
  std::exit(3);
}

int Devices() {
  int count = 0;
  Check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count == 0) {
    std::fprintf(stderr, "testbed-gpu-probe: cudaGetDeviceCount found no device\n");
    return 3;
  }
  int driver = 0, runtime = 0;
  Check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  Check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  std::printf("{\"devices\": %d, \"driver_api\": %d, \"runtime\": %d}\n", count, driver, runtime);
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    Check(cudaGetDeviceProperties(&p, d), "cudaGetDeviceProperties");
    std::printf("{\"device\": %d, \"name\": \"%s\", \"cc\": \"%d.%d\", \"memory_bytes\": %zu, "
                "\"sms\": %d, \"pci_bus\": %d}\n",
                d, p.name, p.major, p.minor, p.totalGlobalMem, p.multiProcessorCount, p.pciBusID);
  }
  return 0;
}

int UcxMemoryTypes() {
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  ucp_context_h context = nullptr;
  ucs_status_t status = ucp_init(&params, nullptr, &context);
  if (status != UCS_OK) {
    std::fprintf(stderr, "testbed-gpu-probe: ucp_init: %s\n", ucs_status_string(status));
    return 1;
  }
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  status = ucp_context_query(context, &attr);
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  if (status == UCS_OK) {
    const auto has = [&](ucs_memory_type_t t) { return (attr.memory_types >> t) & 1 ? 1 : 0; };
    std::printf("{\"ucx\": \"%u.%u.%u\", \"memory_types\": \"0x%llx\", \"host\": %d, "
                "\"cuda\": %d, \"cuda_managed\": %d}\n",
                major, minor, release, static_cast<unsigned long long>(attr.memory_types),
                has(UCS_MEMORY_TYPE_HOST), has(UCS_MEMORY_TYPE_CUDA),
                has(UCS_MEMORY_TYPE_CUDA_MANAGED));
  }
  ucp_cleanup(context);
  return status == UCS_OK ? 0 : 1;
}

// Seconds per copy of `bytes`, the best of a few timed rounds after one untimed.
double SecondsPerCopy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  const int copies = bytes >= (64u << 20) ? 4 : bytes >= (1u << 20) ? 20 : 200;
  Check(cudaMemcpy(dst, src, bytes, kind), "cudaMemcpy");
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < copies; ++i) Check(cudaMemcpy(dst, src, bytes, kind), "cudaMemcpy");
    Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count() / copies);
  }
  return best;
}

int Memcpy() {
  constexpr std::size_t kMax = std::size_t{256} << 20;
  void* device = nullptr;
  void* pinned = nullptr;
  Check(cudaMalloc(&device, kMax), "cudaMalloc");
  Check(cudaHostAlloc(&pinned, kMax, cudaHostAllocDefault), "cudaHostAlloc");
  std::vector<char> pageable(kMax, 1);  // touched: first-touch faults are not the copy's
  std::memset(pinned, 1, kMax);
  for (const bool is_pinned : {false, true}) {
    char* host = is_pinned ? static_cast<char*>(pinned) : pageable.data();
    for (std::size_t bytes = 4096; bytes <= kMax; bytes *= 4) {
      const double h2d = SecondsPerCopy(device, host, bytes, cudaMemcpyHostToDevice);
      const double d2h = SecondsPerCopy(host, device, bytes, cudaMemcpyDeviceToHost);
      for (const auto& [direction, seconds] : {std::pair{"h2d", h2d}, std::pair{"d2h", d2h}}) {
        std::printf("{\"host_memory\": \"%s\", \"direction\": \"%s\", \"bytes\": %zu, "
                    "\"us\": %.3f, \"gbps\": %.3f}\n",
                    is_pinned ? "pinned" : "pageable", direction, bytes, seconds * 1e6,
                    bytes / seconds / 1e9);
      }
    }
  }
  cudaFreeHost(pinned);
  cudaFree(device);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 2 ? argv[1] : "";
  if (mode == "devices") return Devices();
  if (mode == "ucx") return UcxMemoryTypes();
  if (mode == "memcpy") return Memcpy();
  std::fprintf(stderr, "usage: %s devices|ucx|memcpy\n", argv[0]);
  return 2;
}
