// CUDA memory (pinned and device) and the reduction kernels. Built in every
// build: without CUDA it checks that asking for CUDA memory is a one-line
// refusal naming the build option; with CUDA but no usable GPU (this CI
// machine: no driver) the GPU cases skip with the CUDA error's name; on a
// GPU machine they run every reduction and every scheduled collective on
// device memory and require results bit-identical to host memory's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "allreduce/collective.h"
#include "allreduce/data_type.h"
#include "allreduce/inprocess_run.h"
#include "allreduce/memory.h"

namespace testbed {
namespace {

TEST(MemoryTypes, NamesRoundTripAndOnlyHostKindsAreHostAccessible) {
  for (MemoryType type :
       {MemoryType::kHost, MemoryType::kPinned, MemoryType::kCuda, MemoryType::kFakeDevice}) {
    EXPECT_EQ(ParseMemoryType(Name(type)), type);
  }
  EXPECT_EQ(ParseMemoryType("gpu"), std::nullopt);
  EXPECT_EQ(MemoryTypeNames(), "host, pinned, cuda, fake-device");
  EXPECT_TRUE(HostAccessible(MemoryType::kHost));
  EXPECT_TRUE(HostAccessible(MemoryType::kPinned));
  EXPECT_FALSE(HostAccessible(MemoryType::kCuda));
  EXPECT_FALSE(HostAccessible(MemoryType::kFakeDevice));
  EXPECT_TRUE(MemoryUsable(MemoryType::kHost).ok());
  EXPECT_TRUE(MemoryUsable(MemoryType::kFakeDevice).ok());
}

TEST(MemoryTypes, CudaMemoryIsUsableOrRefusedInOneLineSayingWhy) {
  for (MemoryType type : {MemoryType::kPinned, MemoryType::kCuda}) {
    const absl::Status usable = MemoryUsable(type);
    SCOPED_TRACE(usable.ToString());
    EXPECT_EQ(std::string(usable.message()).find('\n'), std::string::npos);
#if TESTBED_HAVE_CUDA
    // A build with CUDA: a GPU, or the CUDA runtime's own reason there is none.
    if (!usable.ok()) {
      EXPECT_EQ(usable.code(), absl::StatusCode::kUnavailable);
      EXPECT_NE(std::string(usable.message()).find("no CUDA device: cudaError"),
                std::string::npos);
    }
#else
    EXPECT_EQ(usable.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(std::string(usable.message()).find("TESTBED_CUDA"), std::string::npos);
#endif
  }
}

// Values that tell reductions apart: signed zeros, infinities, NaNs, the
// smallest subnormal, and ordinary numbers of both signs.
template <typename T>
std::vector<T> Awkward(std::size_t count, int seed) {
  std::vector<T> special;
  if constexpr (std::is_floating_point_v<T>) {
    special = {T(0), -T(0), std::numeric_limits<T>::infinity(),
               -std::numeric_limits<T>::infinity(), std::numeric_limits<T>::quiet_NaN(),
               std::numeric_limits<T>::denorm_min(), T(1) / T(3)};
  } else {
    special = {0, -1, std::numeric_limits<T>::max(), std::numeric_limits<T>::min()};
  }
  std::vector<T> values(count);
  for (std::size_t i = 0; i < count; ++i) {
    values[i] = (i + seed) % 5 == 0 ? special[(i / 5 + seed) % special.size()]
                                    : static_cast<T>(static_cast<double>((i * 7919 + seed) % 2001) -
                                                     1000.5 * std::is_floating_point_v<T>);
  }
  return values;
}

// float16 inputs: Awkward<float>'s values stored as halves (1/3 rounds, the
// float subnormal flushes to zero, NaN stays NaN), and every seventh element
// one of half's own edges: the largest half, whose sums overflow to
// infinity, and the smallest subnormal half.
Bytes AwkwardHalves(std::size_t count, int seed) {
  const std::vector<float> values = Awkward<float>(count, seed);
  Bytes bytes(count * ElementSize(DataType::kFloat16));
  for (std::size_t i = 0; i < count; ++i) {
    double value = values[i];
    if ((i + seed) % 7 == 3) value = (i / 7) % 2 == 0 ? 65504.0 : std::ldexp(1.0, -24);
    StoreElement(DataType::kFloat16, bytes.data(), static_cast<std::int64_t>(i), value);
  }
  return bytes;
}

template <typename T>
Bytes AsBytes(const std::vector<T>& values) {
  Bytes bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

class CudaDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::Status usable = MemoryUsable(MemoryType::kCuda);
    if (!usable.ok()) GTEST_SKIP() << usable.message();
  }
};

// Inputs of `type` for the bit-identity checks.
Bytes AwkwardBytes(DataType type, std::size_t count, int seed) {
  switch (type) {
    case DataType::kFloat32: return AsBytes(Awkward<float>(count, seed));
    case DataType::kFloat64: return AsBytes(Awkward<double>(count, seed));
    case DataType::kInt32: return AsBytes(Awkward<std::int32_t>(count, seed));
    case DataType::kFloat16: return AwkwardHalves(count, seed);
  }
  return {};
}

constexpr DataType kEveryType[] = {DataType::kFloat32, DataType::kFloat64, DataType::kInt32,
                                   DataType::kFloat16};

void ExpectKernelMatchesHost(DataType type) {
  constexpr std::size_t kCount = 1'000'003;  // not a multiple of any block size
  const Bytes a = AwkwardBytes(type, kCount, 1);
  const Bytes b = AwkwardBytes(type, kCount, 2);
  const MemoryOps& device = MemoryOpsFor(MemoryType::kCuda);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax}) {
    SCOPED_TRACE(std::string(Name(type)) + " " + std::string(Name(op)));
    Bytes host = a;
    ReduceInto(type, op, host.data(), b.data(), kCount);
    Allocation dst = device.Allocate(a.size());
    Allocation src = device.Allocate(b.size());
    device.Upload(dst.buffer(), a);
    device.Upload(src.buffer(), b);
    device.Reduce(type, op, dst.buffer(), src.buffer(), kCount);
    Bytes from_device(a.size());
    device.Download(from_device, dst.buffer());
    EXPECT_EQ(std::memcmp(from_device.data(), host.data(), host.size()), 0);
  }
}

TEST_F(CudaDevice, KernelsAreBitIdenticalToTheHostLoop) {
  for (DataType type : kEveryType) ExpectKernelMatchesHost(type);
}

// Every scheduled collective, in device and in pinned memory, gives the
// host's bytes exactly, for each element type.
TEST_F(CudaDevice, EveryCollectiveGivesTheHostsBytesInPinnedAndDeviceMemory) {
  for (const Collective* collective : CollectivesOf(Kinds::kScheduled)) {
    for (int n : {2, 3, 4}) {
      for (DataType type : kEveryType) {
        SCOPED_TRACE(std::string(collective->name) + " N=" + std::to_string(n) + " " +
                     std::string(Name(type)));
        std::vector<Bytes> inputs;
        for (int r = 0; r < n; ++r) inputs.push_back(AwkwardBytes(type, 10007, r));
        InProcessRunOptions options;
        options.type = type;
        const InProcessRun host = RunInProcess(*collective, inputs, options);
        for (MemoryType memory : {MemoryType::kPinned, MemoryType::kCuda}) {
          options.memory = memory;
          const InProcessRun run = RunInProcess(*collective, inputs, options);
          for (int r = 0; r < n; ++r) {
            ASSERT_TRUE(run.status[r].ok()) << run.status[r];
            EXPECT_EQ(run.buffers[r], host.buffers[r]) << Name(memory) << " rank " << r;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace testbed
