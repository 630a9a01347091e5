// --gpu-path: how device memory meets UCX. The decision (ResolveGpuPath), the
// gate in UcxTransport::Create on what UCX reports at run time, the spec's
// field from flags and files, and what a rank's rows say. On a UCX without
// CUDA memory (Debian's, or one built with CUDA on a machine without a GPU)
// direct must be refused before anything runs: handed a device pointer,
// Debian's UCX 1.13 crashes.
#include <gtest/gtest.h>
#include <google/protobuf/text_format.h>
#include <ucs/memory/memory_type.h>

#include <thread>

#include "allreduce/transport/inprocess_transport.h"
#include "allreduce/transport/ucx_settings.h"
#include "allreduce/transport/ucx_transport.h"
#include "experiments/cli/experiment_flags.h"
#include "proto/spec.h"
#include "server/result_aggregator.h"
#include "worker/sweep_runner.h"

namespace testbed {
namespace {

constexpr std::uint64_t kHostOnly = std::uint64_t{1} << UCS_MEMORY_TYPE_HOST;
constexpr std::uint64_t kWithCuda = kHostOnly | (std::uint64_t{1} << UCS_MEMORY_TYPE_CUDA) |
                                    (std::uint64_t{1} << UCS_MEMORY_TYPE_CUDA_MANAGED);

std::string Resolved(GpuPathRequest request, MemoryType memory, std::uint64_t types) {
  absl::StatusOr<std::string> path = ResolveGpuPath(request, memory, types);
  return path.ok() ? *path : "refused: " + std::string(path.status().message());
}

TEST(GpuPathTest, ParsesTheThreeRequestsAndEmptyAsAuto) {
  EXPECT_EQ(ParseGpuPathRequest(""), GpuPathRequest::kAuto);
  EXPECT_EQ(ParseGpuPathRequest("auto"), GpuPathRequest::kAuto);
  EXPECT_EQ(ParseGpuPathRequest("direct"), GpuPathRequest::kDirect);
  EXPECT_EQ(ParseGpuPathRequest("staged"), GpuPathRequest::kStaged);
  EXPECT_FALSE(ParseGpuPathRequest("gdr").has_value());
}

TEST(GpuPathTest, TheCudaBitDecidesNotTheBuild) {
  EXPECT_FALSE(UcxHandlesCuda(kHostOnly));  // Debian's UCX, or CUDA UCX without a GPU
  EXPECT_TRUE(UcxHandlesCuda(kWithCuda));
  EXPECT_FALSE(UcxHandlesCuda(0));
}

TEST(GpuPathTest, AutoIsDirectOnlyForCudaMemoryOnAUcxWithCuda) {
  EXPECT_EQ(Resolved(GpuPathRequest::kAuto, MemoryType::kCuda, kWithCuda), "direct");
  EXPECT_EQ(Resolved(GpuPathRequest::kAuto, MemoryType::kCuda, kHostOnly), "staged");
  EXPECT_EQ(Resolved(GpuPathRequest::kAuto, MemoryType::kFakeDevice, kWithCuda), "staged");
  EXPECT_EQ(Resolved(GpuPathRequest::kAuto, MemoryType::kFakeDevice, kHostOnly), "staged");
  EXPECT_EQ(Resolved(GpuPathRequest::kAuto, MemoryType::kHost, kWithCuda), "none");
  EXPECT_EQ(Resolved(GpuPathRequest::kAuto, MemoryType::kPinned, kHostOnly), "none");
  EXPECT_EQ(Resolved(GpuPathRequest::kStaged, MemoryType::kCuda, kWithCuda), "staged");
  EXPECT_EQ(Resolved(GpuPathRequest::kStaged, MemoryType::kHost, kHostOnly), "none");
  EXPECT_EQ(Resolved(GpuPathRequest::kDirect, MemoryType::kCuda, kWithCuda), "direct");
  EXPECT_EQ(Resolved(GpuPathRequest::kDirect, MemoryType::kHost, kWithCuda), "none");
}

TEST(GpuPathTest, DirectIsRefusedInOneLineNamingTheReason) {
  for (MemoryType memory : {MemoryType::kCuda, MemoryType::kFakeDevice, MemoryType::kHost}) {
    absl::StatusOr<std::string> path = ResolveGpuPath(GpuPathRequest::kDirect, memory, kHostOnly);
    ASSERT_FALSE(path.ok());
    EXPECT_EQ(path.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(path.status().message(),
              "gpu_path direct refused: this UCX reports no CUDA memory (memory_types 0x1, no "
              "CUDA bit): it was built without CUDA, or finds no GPU or driver; build it with "
              ".ci/build-ucx-cuda, or use gpu_path staged");
  }
  // fake-device memory is host pages UCX must never touch, CUDA or not.
  EXPECT_EQ(Resolved(GpuPathRequest::kDirect, MemoryType::kFakeDevice, kWithCuda),
            "refused: gpu_path direct refused: fake-device memory is host pages UCX must not "
            "touch; it can only be staged");
}

// The real UCX this process links: here (no GPU) it reports no CUDA memory,
// whether it is Debian's or one built with .ci/build-ucx-cuda.
TEST(GpuPathTest, UcxTransportRefusesDirectWhereUcxReportsNoCudaMemory) {
  absl::StatusOr<std::unique_ptr<UcxTransport>> probe = UcxTransport::Create(0, 1);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_TRUE((*probe)->memory_types() & kHostOnly);
  if (UcxHandlesCuda((*probe)->memory_types())) GTEST_SKIP() << "this UCX moves CUDA memory";
  EXPECT_FALSE((*probe)->device_direct());  // auto picks staged here

  absl::StatusOr<std::unique_ptr<UcxTransport>> direct =
      UcxTransport::Create(0, 2, UcxOptions{.gpu_path = GpuPathRequest::kDirect});
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(direct.status().message().find("no CUDA memory"), std::string::npos);
  EXPECT_EQ(direct.status().message().find('\n'), std::string::npos);

  absl::StatusOr<std::unique_ptr<UcxTransport>> staged =
      UcxTransport::Create(0, 2, UcxOptions{.gpu_path = GpuPathRequest::kStaged});
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_FALSE((*staged)->device_direct());
}

TEST(GpuPathTest, SpecCarriesTheFlagAndSurvivesATextRoundTrip) {
  for (const char* path : {"auto", "direct", "staged"}) {
    CLI::App app;
    ExperimentFlags flags;
    AddExperimentFlags(app, flags);
    app.parse(std::string("--memory cuda --gpu-path ") + path, /*program_name_included=*/false);
    absl::StatusOr<proto::ExperimentSpec> spec = BuildSpec(flags, app);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->gpu_path(), path);

    std::string text;
    ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(*spec, &text));
    EXPECT_NE(text.find(std::string("gpu_path: \"") + path + "\""), std::string::npos) << text;
    proto::ExperimentSpec back;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &back));
    EXPECT_EQ(back.gpu_path(), path);
  }
  CLI::App app;
  ExperimentFlags flags;
  AddExperimentFlags(app, flags);
  app.parse(std::string("--memory cuda"), /*program_name_included=*/false);
  EXPECT_EQ(BuildSpec(flags, app)->gpu_path(), "auto");  // the default, written down
  CLI::App bad;
  AddExperimentFlags(bad, flags);
  EXPECT_THROW(bad.parse(std::string("--gpu-path gdr"), false), CLI::ValidationError);
}

TEST(GpuPathTest, ValidationNamesAnUnknownPath) {
  proto::ExperimentSpec spec;
  spec.set_workers(2);
  spec.add_algorithms("ring");
  spec.add_sizes(4096);
  ApplyDefaults(spec);
  EXPECT_EQ(spec.gpu_path(), "auto");
  spec.set_gpu_path("sideways");
  EXPECT_EQ(ValidateSpec(spec).message(),
            "bad experiment: unknown gpu_path 'sideways' (auto, direct, staged)");
}

// Rows over the in-process transport: host memory is "none"; fake-device
// memory is "staged" for the all-reduces and ps alike, even where the
// transport says it takes device memory directly (only cuda memory does).
std::vector<proto::ResultRow> SweepRows(const std::string& memory, bool device_direct) {
  proto::ExperimentSpec spec;
  spec.set_workers(2);
  spec.add_algorithms("ring");
  spec.add_algorithms("butterfly");
  spec.add_sizes(4 * 1001);
  spec.set_iterations(1);
  spec.set_memory(memory);
  ApplyDefaults(spec);
  InProcessFabric fabric(2);
  std::vector<std::vector<proto::RankResult>> results(2);
  std::vector<absl::Status> status(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto transport = fabric.Connect(r);
      SweepEnvironment env;
      env.transport = transport.get();
      env.transport_label = "inprocess";
      env.device_direct = device_direct;
      status[r] = RunSweep(spec, env, [&](const proto::RankResult& result) {
        results[r].push_back(result);
        return absl::OkStatus();
      });
    });
  }
  for (auto& t : threads) t.join();
  std::vector<proto::ResultRow> rows;
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(status[r].ok()) << status[r];
  for (std::size_t i = 0; i < results[0].size(); ++i) {
    absl::StatusOr<proto::ResultRow> row = AggregateRow(spec, {results[0][i], results[1][i]});
    EXPECT_TRUE(row.ok()) << row.status();
    if (row.ok()) rows.push_back(*row);
  }
  return rows;
}

TEST(GpuPathTest, RowsSayHowTheMemoryTravelled) {
  for (const auto& [memory, direct, expected] :
       std::vector<std::tuple<std::string, bool, std::string>>{{"host", false, "none"},
                                                               {"host", true, "none"},
                                                               {"fake-device", false, "staged"},
                                                               {"fake-device", true, "staged"}}) {
    SCOPED_TRACE(memory + (direct ? " direct" : ""));
    const std::vector<proto::ResultRow> rows = SweepRows(memory, direct);
    ASSERT_EQ(rows.size(), 2u);
    for (const proto::ResultRow& row : rows) {
      EXPECT_EQ(row.memory(), memory);
      EXPECT_EQ(row.gpu_path(), expected);
      EXPECT_EQ(row.wrong(), 0);
    }
  }
}

// Where UCX uses its CUDA transports, the endpoint's lanes name them, and so
// does the rows' transport column.
TEST(GpuPathTest, TransportLabelNamesCudaLanes) {
  const std::string info =
      "#                 lane[0]:  1:tcp/lo.0 md[1]  -> md[1]/tcp/sysdev[255] am am_bw#0\n"
      "#                 lane[1]:  6:cuda_ipc/cuda md[5] -> md[5]/cuda_ipc rma_bw#0\n"
      "#                 lane[2]:  5:cuda_copy/cuda md[4] -> md[4]/cuda_cpy rma_bw#1\n";
  EXPECT_EQ(UcxLanes(info), "tcp/lo.0+cuda_ipc/cuda+cuda_copy/cuda");
  // Rows of host or staged memory did not travel on them.
  EXPECT_EQ(WithoutCudaLanes("ucx:tcp/lo.0+cuda_ipc/cuda+cuda_copy/cuda"), "ucx:tcp/lo.0");
  EXPECT_EQ(WithoutCudaLanes("ucx:cuda_copy/cuda+tcp/lo.0+cma/memory"), "ucx:tcp/lo.0+cma/memory");
  EXPECT_EQ(WithoutCudaLanes("ucx:tcp/lo.0"), "ucx:tcp/lo.0");
  EXPECT_EQ(WithoutCudaLanes("ucx:cuda_ipc/cuda"), "ucx:unknown");
  EXPECT_EQ(WithoutCudaLanes("ucx:none"), "ucx:none");
}

}  // namespace
}  // namespace testbed
