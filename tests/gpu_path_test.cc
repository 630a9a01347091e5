// --gpu-path: how device memory meets UCX. The decision (ResolveGpuPath), the
// gate in UcxTransport::Create on what UCX reports at run time, the spec's
// field from flags and files, what a rank's rows say, and that staged runs
// of every algorithm are pipelined (a segment by default) and exact. On a UCX without
// CUDA memory (Debian's, or one built with CUDA on a machine without a GPU)
// direct must be refused before anything runs: handed a device pointer,
// Debian's UCX 1.13 crashes.
#include <gtest/gtest.h>
#include <google/protobuf/text_format.h>
#include <ucs/memory/memory_type.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <thread>
#include <tuple>

#include "allreduce/collective.h"
#include "allreduce/segment_plan.h"
#include "allreduce/transport/inprocess_transport.h"
#include "allreduce/transport/ucx_settings.h"
#include "allreduce/transport/ucx_transport.h"
#include "experiments/cli/experiment_flags.h"
#include "proto/enum_text.h"
#include "proto/spec.h"
#include "server/in_process_shard.h"
#include "proto/result_aggregator.h"
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

// `--segment off` reaches the spec as "off": staged memory is segmented when
// no segment is given, so "off" must stay distinguishable from "".
TEST(GpuPathTest, SegmentOffOnTheCommandLineIsKeptApartFromNoSegment) {
  for (const auto& [args, expected] : std::vector<std::pair<std::string, std::string>>{
           {"--memory fake-device --segment off", "off"},
           {"--memory fake-device", ""},
           {"--segment auto", "auto"}}) {
    CLI::App app;
    ExperimentFlags flags;
    AddExperimentFlags(app, flags);
    app.parse(args, /*program_name_included=*/false);
    absl::StatusOr<proto::ExperimentSpec> spec = BuildSpec(flags, app);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(SegmentText(spec->segment()), expected) << args;
  }
}

TEST(GpuPathTest, SpecCarriesTheFlagAndSurvivesATextRoundTrip) {
  for (const char* path : {"auto", "direct", "staged"}) {
    CLI::App app;
    ExperimentFlags flags;
    AddExperimentFlags(app, flags);
    app.parse(std::string("--memory cuda --gpu-path ") + path, /*program_name_included=*/false);
    absl::StatusOr<proto::ExperimentSpec> spec = BuildSpec(flags, app);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(EnumText(spec->gpu_path()), path);

    std::string text;
    ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(*spec, &text));
    // The default (auto) is the proto's zero value, which text format omits.
    if (std::string(path) != "auto") {
      EXPECT_NE(text.find(std::string("gpu_path: ") + path), std::string::npos) << text;
    }
    proto::ExperimentSpec back;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &back));
    EXPECT_EQ(EnumText(back.gpu_path()), path);
  }
  CLI::App app;
  ExperimentFlags flags;
  AddExperimentFlags(app, flags);
  app.parse(std::string("--memory cuda"), /*program_name_included=*/false);
  EXPECT_EQ(BuildSpec(flags, app)->gpu_path(), proto::GpuPath::auto_);  // the default
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
  EXPECT_EQ(spec.gpu_path(), proto::GpuPath::auto_);
  spec.set_gpu_path(static_cast<proto::GpuPath::Kind>(7));
  EXPECT_EQ(ValidateSpec(spec).message(),
            "bad experiment: unknown gpu_path value 7 (auto, direct, staged)");
}

// A sweep run by every rank on its own thread, and the rows it makes.
struct SweepSetup {
  std::string memory = "host";
  bool device_direct = false;
  std::vector<std::string> algorithms = {"ring", "butterfly"};
  std::vector<std::int64_t> sizes = {4 * 1001};
  int workers = 2;
  // UCX transports over TCP (staging device memory, as Debian's UCX must),
  // instead of the in-process one.
  bool ucx = false;
  std::string segment;  // the spec's; empty: not given
};

// UCX transports of `workers` ranks in this process, connected; empty on failure.
std::vector<std::unique_ptr<Transport>> UcxRanks(int workers) {
  std::vector<std::unique_ptr<Transport>> ranks;
  std::vector<std::vector<std::byte>> addresses;
  const char* old_tls = std::getenv("UCX_TLS");
  const std::string restore = old_tls == nullptr ? "" : old_tls;
  setenv("UCX_TLS", "tcp", 1);
  for (int r = 0; r < workers; ++r) {
    absl::StatusOr<std::unique_ptr<UcxTransport>> transport =
        UcxTransport::Create(r, workers, UcxOptions{.gpu_path = GpuPathRequest::kStaged});
    EXPECT_TRUE(transport.ok()) << transport.status();
    if (!transport.ok()) break;
    addresses.push_back((*transport)->WorkerAddress());
    ranks.push_back(*std::move(transport));
  }
  if (old_tls == nullptr) {
    unsetenv("UCX_TLS");
  } else {
    setenv("UCX_TLS", restore.c_str(), 1);
  }
  if (static_cast<int>(ranks.size()) != workers) return {};
  for (auto& transport : ranks) {
    const absl::Status connected = static_cast<UcxTransport&>(*transport).Connect(addresses);
    EXPECT_TRUE(connected.ok()) << connected;
    if (!connected.ok()) return {};
  }
  return ranks;
}

std::vector<proto::ResultRow> SweepRows(const SweepSetup& setup) {
  const int n = setup.workers;
  proto::ExperimentSpec spec;
  spec.set_workers(n);
  for (const std::string& name : setup.algorithms) spec.add_algorithms(name);
  for (std::int64_t bytes : setup.sizes) spec.add_sizes(bytes);
  spec.set_iterations(1);
  spec.set_memory(*ParseEnumText<proto::Memory::Kind>(setup.memory));
  if (!setup.segment.empty()) *spec.mutable_segment() = *ParseSegment(setup.segment);
  ApplyDefaults(spec);
  EXPECT_TRUE(ValidateSpec(spec).ok()) << ValidateSpec(spec);
  // ps needs a shard; one serves every rank.
  const Credentials credentials{"job", "token"};
  std::unique_ptr<InProcessShard> shard;
  if (std::ranges::find(setup.algorithms, "ps") != setup.algorithms.end()) {
    absl::StatusOr<std::unique_ptr<InProcessShard>> started =
        InProcessShard::Start(credentials, std::chrono::seconds(30));
    EXPECT_TRUE(started.ok()) << started.status();
    if (!started.ok()) return {};
    shard = *std::move(started);
  }
  InProcessFabric fabric(n);
  std::vector<std::unique_ptr<Transport>> ranks;
  if (setup.ucx) {
    ranks = UcxRanks(n);
    if (ranks.empty()) return {};
  } else {
    for (int r = 0; r < n; ++r) ranks.push_back(fabric.Connect(r));
  }
  std::vector<std::vector<proto::RankResult>> results(n);
  std::vector<absl::Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::optional<PsClient> ps;
      if (shard != nullptr) {
        ps.emplace(std::vector<std::string>{shard->address()}, credentials,
                   std::chrono::seconds(30));
      }
      SweepEnvironment env;
      env.transport = ranks[r].get();
      env.transport_label = setup.ucx ? "ucx:tcp" : "inprocess";
      env.device_direct = setup.device_direct;
      env.parameter_server = ps ? &*ps : nullptr;
      status[r] = RunSweep(spec, env, [&](const proto::RankResult& result) {
        results[r].push_back(result);
        return absl::OkStatus();
      });
      // UCX ranks close concurrently, as processes would.
      ranks[r].reset();
    });
  }
  for (auto& t : threads) t.join();
  std::vector<proto::ResultRow> rows;
  for (int r = 0; r < n; ++r) EXPECT_TRUE(status[r].ok()) << status[r];
  for (std::size_t i = 0; i < results[0].size(); ++i) {
    std::vector<proto::RankResult> by_rank;
    for (int r = 0; r < n; ++r) {
      if (i < results[r].size()) by_rank.push_back(results[r][i]);
    }
    absl::StatusOr<proto::ResultRow> row = AggregateRow(spec, by_rank);
    EXPECT_TRUE(row.ok()) << row.status();
    if (row.ok()) rows.push_back(*row);
  }
  return rows;
}

// Rows over the in-process transport: host memory is "none"; fake-device
// memory is "staged" for the all-reduces and ps alike, even where the
// transport says it takes device memory directly (only cuda memory does).
std::vector<proto::ResultRow> SweepRows(const std::string& memory, bool device_direct) {
  return SweepRows(SweepSetup{.memory = memory, .device_direct = device_direct, .segment = ""});
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

// Staged memory with no segment given is pipelined anyway: every algorithm of
// the registry, ps included, over UCX (which stages fake-device memory, as
// Debian's UCX stages a GPU's) records the segment it was cut into and ends
// exact, with the payload of the closed form. ps is staged per chunk by its
// client (worker/ps_client.h), not cut by the executor: its rows keep 0. A
// stray host access to the fake-device pages anywhere crashes the test.
TEST(GpuPathTest, StagedRunsOfEveryAlgorithmAreSegmentedByDefaultAndExact) {
  std::vector<std::string> every;
  for (const Collective* c : CollectivesOf(Kinds::kAll)) every.emplace_back(c->name);
  // A ring step of the larger size spans several staged segments.
  const std::vector<std::int64_t> sizes = {4 * 1001, 4 * 600011};
  const std::vector<proto::ResultRow> rows = SweepRows(SweepSetup{.memory = "fake-device",
                                                                  .algorithms = every,
                                                                  .sizes = sizes,
                                                                  .workers = 3,
                                                                  .ucx = true,
                                                                  .segment = ""});
  ASSERT_EQ(rows.size(), every.size() * sizes.size());
  for (const proto::ResultRow& row : rows) {
    SCOPED_TRACE(row.algorithm() + " " + std::to_string(row.bytes()));
    EXPECT_EQ(row.gpu_path(), "staged");
    EXPECT_EQ(row.wrong(), 0);
    EXPECT_EQ(row.payload_bytes_total(), row.theory_bytes_total());
    const bool ps = row.algorithm() == "ps";
    EXPECT_EQ(row.segment_bytes(), ps ? 0 : StagedSegmentBytes(row.bytes()));
    // Every payload byte crossed between device and host once: an all-reduce
    // byte is copied down by its sender and up by its receiver (the payload
    // counts it once, as sent); ps copies each rank's push down and its pull
    // up (the payload counts both).
    EXPECT_EQ(row.staged_bytes_total(),
              ps ? row.payload_bytes_total() : 2 * row.payload_bytes_total());
  }
}

// What the user says still wins: "off" runs whole steps, a size is used as
// it is; host memory is not segmented unless asked.
TEST(GpuPathTest, AnExplicitSegmentOrHostMemoryKeepsItsOwnSegment) {
  for (const auto& [memory, segment, expected] :
       std::vector<std::tuple<std::string, std::string, std::uint64_t>>{
           {"fake-device", "off", 0}, {"fake-device", "64KiB", 65536}, {"host", "", 0}}) {
    SCOPED_TRACE(memory + " segment '" + segment + "'");
    const std::vector<proto::ResultRow> rows = SweepRows(SweepSetup{
        .memory = memory, .sizes = {4 * 300007}, .workers = 3, .ucx = true, .segment = segment});
    ASSERT_EQ(rows.size(), 2u);
    for (const proto::ResultRow& row : rows) {
      EXPECT_EQ(row.segment_bytes(), expected);
      EXPECT_EQ(row.wrong(), 0);
      EXPECT_EQ(row.payload_bytes_total(), row.theory_bytes_total());
      EXPECT_EQ(row.staged_bytes_total() > 0, memory == "fake-device");
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
