// The pieces of an experiment that need no network: specs from flags and
// files, one rank's sweep over the in-process transport, and the aggregation
// of per-rank results into rows.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "allreduce/collective.h"
#include "allreduce/segment_plan.h"
#include "allreduce/transport/inprocess_transport.h"
#include "experiments/cli/experiment_flags.h"
#include "proto/enum_text.h"
#include "proto/spec.h"
#include "proto/result_aggregator.h"
#include "worker/interface_counters.h"
#include "worker/sweep_runner.h"
#include "allreduce/transport/ucx_settings.h"
#include "worker/worker_daemon.h"

namespace testbed {
namespace {

TEST(SizeListTest, RangesStepByFourAndIncludeTheMaximum) {
  EXPECT_EQ(*ParseSizeList("4KiB:64KiB"), (std::vector<std::int64_t>{4096, 16384, 65536}));
  EXPECT_EQ(ParseSizeList("8:16MiB")->back(), 16 << 20);
  EXPECT_EQ(*ParseSizeList("1KiB:8KiB:x2"), (std::vector<std::int64_t>{1024, 2048, 4096, 8192}));
  EXPECT_EQ(*ParseSizeList("1MiB,4096,4096"), (std::vector<std::int64_t>{4096, 1 << 20}));
  EXPECT_EQ(*ParseSizeList("100:100"), (std::vector<std::int64_t>{100}));
}

TEST(SizeListTest, RejectsMalformedLists) {
  for (const char* bad : {"", "4KiB:", "64KiB:4KiB", "1:2:3:4", "4:64:x1", "4:64:*2", "1,,2",
                          "0:64", "1Q"}) {
    EXPECT_FALSE(ParseSizeList(bad).ok()) << bad;
  }
}

TEST(SizeListTest, RefusesNumbersOutOfRangeNamingThem) {
  for (const char* bad : {"4KiB:16MiB:x99999999999999999999", "4KiB:16MiB:x9223372036854775808",
                          "4KiB:16MiB:x18446744073709551617"}) {
    const auto sizes = ParseSizeList(bad);
    ASSERT_FALSE(sizes.ok()) << bad;
    EXPECT_NE(sizes.status().message().find("bad size step 'x"), std::string::npos)
        << sizes.status();
  }
  const auto too_large = ParseSizeList("4KiB:99999999999999999999");
  ASSERT_FALSE(too_large.ok());
  EXPECT_NE(too_large.status().message().find("'99999999999999999999'"), std::string::npos)
      << too_large.status();
  EXPECT_NE(ParseSizeList("-4096").status().message().find("negative"), std::string::npos);
  EXPECT_EQ(*ParseSizeList("4KiB:16MiB:x9223372036854775807"),
            (std::vector<std::int64_t>{4096, 16 << 20}));
}

TEST(SpecTest, ValidationNamesTheBadField) {
  proto::ExperimentSpec spec;
  spec.set_workers(4);
  spec.add_algorithms("ring");
  spec.add_sizes(4096);
  ApplyDefaults(spec);
  EXPECT_TRUE(ValidateSpec(spec).ok());
  EXPECT_EQ(spec.iterations(), 10u);

  proto::ExperimentSpec odd = spec;
  odd.set_sizes(0, 4097);
  EXPECT_NE(ValidateSpec(odd).message().find("4097 is not a whole number of float32"),
            std::string::npos);
  // A negative size is called negative, even one that divides into elements
  // (-4096), not "not a whole number of elements".
  for (std::int64_t negative : {-4096, -4097, -1}) {
    proto::ExperimentSpec below_zero = spec;
    below_zero.set_sizes(0, negative);
    const std::string message(ValidateSpec(below_zero).message());
    EXPECT_NE(message.find(absl::StrCat("size ", negative, " is negative")), std::string::npos)
        << message;
    EXPECT_EQ(message.find("whole number"), std::string::npos) << message;
  }
  proto::ExperimentSpec unknown = spec;
  unknown.add_algorithms("hypercube");
  EXPECT_NE(ValidateSpec(unknown).message().find("unknown algorithm 'hypercube' (choose from ps, naive"),
            std::string::npos);
  proto::ExperimentSpec nobody = spec;
  nobody.set_workers(0);
  EXPECT_FALSE(ValidateSpec(nobody).ok());
  proto::ExperimentSpec gpu = spec;
  // A value this build does not know (a newer peer's, or a hand-made message).
  gpu.set_memory(static_cast<proto::Memory::Kind>(9));
  EXPECT_EQ(ValidateSpec(gpu).message(),
            "bad experiment: unknown memory value 9 (host, pinned, cuda, fake-device)");
  gpu.set_memory(proto::Memory::fake_device);
  EXPECT_TRUE(ValidateSpec(gpu).ok());
}

TEST(SpecTest, FileErrorsCarryLineAndColumn) {
  const std::string path = std::filesystem::temp_directory_path() / "testbed_bad_spec.textproto";
  std::ofstream(path) << "workers: 4\nalgorithms: \"ring\"\nsizes: [4096, oops]\n";
  const auto spec = ReadSpecFile(path);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("testbed_bad_spec.textproto:3:15"), std::string::npos)
      << spec.status();
  std::filesystem::remove(path);
}

// A spec file written when these fields were strings is refused with one
// line naming the field, its old value and the new spelling - never read
// with the field quietly dropped (an old link_rate must not become unlimited).
TEST(SpecTest, OldStringSpellingsAreRefusedWithTheNewOne) {
  const std::string path = std::filesystem::temp_directory_path() / "testbed_old_spec.textproto";
  for (const auto& [line, expected] : std::vector<std::pair<std::string, std::string>>{
           {"dtype: \"float64\"", "write dtype: float64"},
           {"memory: \"fake-device\"", "write memory: fake_device"},
           {"network:  \"netns\"", "write network: netns"},
           {"segment: \"1MiB\"", "write segment { bytes: 1048576 }"},
           {"segment: \"auto\"", "write segment { auto { } }"},
           {"link_rate: \"100mbit\"", "write link_rate_bps: 100000000"},
           {"model_alpha: \"100us\"", "write model_alpha_us: 100"}}) {
    std::ofstream(path) << "workers: 2\n" << line << "\n";
    const auto spec = ReadSpecFile(path);
    ASSERT_FALSE(spec.ok()) << line;
    EXPECT_EQ(spec.status().message(),
              absl::StrCat(path, ":2: ", line, " is the old spelling; ", expected));
  }
  std::ofstream(path) << "workers: 2\ndtype: float16\nsegment { bytes: 4096 }\n"
                      << "link_rate_bps: 100000000\nmemory: fake_device\n";
  const auto spec = ReadSpecFile(path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->dtype(), proto::Dtype::float16);
  EXPECT_EQ(spec->segment().bytes(), 4096u);
  EXPECT_EQ(spec->link_rate_bps(), 100000000u);
  EXPECT_EQ(spec->memory(), proto::Memory::fake_device);
  std::filesystem::remove(path);
}

// One vocabulary: every value a spec can name is the data path's own word
// for it, so flags, spec files, rows and the data path agree.
TEST(SpecTest, TheSpecVocabularyIsTheDataPathsNames) {
  for (int v = 0; v < proto::Dtype::Kind_ARRAYSIZE; ++v) {
    const auto dtype = static_cast<proto::Dtype::Kind>(v);
    EXPECT_EQ(EnumText(dtype), Name(DataTypeOf(dtype)));
    EXPECT_EQ(DtypeOf(DataTypeOf(dtype)), dtype);
  }
  for (int v = 0; v < proto::Op::Kind_ARRAYSIZE; ++v) {
    const auto op = static_cast<proto::Op::Kind>(v);
    EXPECT_EQ(EnumText(op), Name(ReduceOpOf(op)));
  }
  for (int v = 0; v < proto::Memory::Kind_ARRAYSIZE; ++v) {
    const auto memory = static_cast<proto::Memory::Kind>(v);
    EXPECT_EQ(EnumText(memory), Name(MemoryTypeOf(memory)));
  }
  EXPECT_EQ(EnumTexts<proto::Dtype::Kind>(), DataTypeNames());
  EXPECT_EQ(EnumTexts<proto::Memory::Kind>(), MemoryTypeNames());
}

TEST(SpecTest, FlagsOverrideOnlyWhatIsGivenBesideASpecFile) {
  const std::string path = std::filesystem::temp_directory_path() / "testbed_good_spec.textproto";
  std::ofstream(path) << "workers: 8\nalgorithms: [\"tree\"]\nsizes: [64]\niterations: 3\n";
  CLI::App app;
  ExperimentFlags flags;
  AddExperimentFlags(app, flags);
  app.parse("--spec " + path + " --iters 5", /*program_name_included=*/false);
  const auto spec = BuildSpec(flags, app);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->workers(), 8u);        // from the file
  EXPECT_EQ(spec->iterations(), 5u);     // from the flag
  EXPECT_EQ(spec->algorithms(0), "tree");
  std::filesystem::remove(path);
}

// With and without wire counting: the barrier that wire counting adds after an
// iteration must not leak into the payload. And pipelined: segments of 1000
// bytes (250 floats, which 1001 is not a multiple of), or auto.
using SweepParam = std::tuple<std::string, std::string>;  // (net device, segment)
class SweepTest : public ::testing::TestWithParam<SweepParam> {};

TEST_P(SweepTest, EveryRankMeasuresExactResultsOverTheInProcessTransport) {
  proto::ExperimentSpec spec;
  spec.set_workers(3);
  // Every collective with a schedule: all of them run in the harness.
  for (const Collective* c : CollectivesOf(Kinds::kScheduled)) spec.add_algorithms(std::string(c->name));
  const std::size_t rows = 2 * CollectivesOf(Kinds::kScheduled).size();
  spec.add_sizes(4 * 1001);
  spec.add_sizes(4);
  spec.set_iterations(2);
  spec.set_warmup(1);
  if (!std::get<1>(GetParam()).empty()) {
    *spec.mutable_segment() = *ParseSegment(std::get<1>(GetParam()));
  }
  ApplyDefaults(spec);
  ASSERT_TRUE(ValidateSpec(spec).ok());

  InProcessFabric fabric(3);
  std::vector<std::vector<proto::RankResult>> results(3);
  std::vector<absl::Status> status(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      auto transport = fabric.Connect(r);
      SweepEnvironment env;
      env.transport = transport.get();
      env.transport_label = "inprocess";
      env.net_device = std::get<0>(GetParam());
      status[r] = RunSweep(spec, env, [&](const proto::RankResult& result) {
        results[r].push_back(result);
        return absl::OkStatus();
      });
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    ASSERT_EQ(results[r].size(), rows);
  }
  for (std::size_t row = 0; row < rows; ++row) {
    std::vector<proto::RankResult> by_rank = {results[0][row], results[1][row], results[2][row]};
    const auto aggregated = AggregateRow(spec, by_rank);
    ASSERT_TRUE(aggregated.ok()) << aggregated.status();
    SCOPED_TRACE(aggregated->algorithm() + " " + std::to_string(aggregated->bytes()));
    EXPECT_EQ(aggregated->wrong(), 0);
    EXPECT_EQ(aggregated->iterations(), 2u);
    // One iteration's payload, barriers excluded.
    EXPECT_EQ(aggregated->payload_bytes_total(), aggregated->theory_bytes_total());
    EXPECT_GT(aggregated->theory_bytes_total(), 0u);  // equal, and not because both are absent
    EXPECT_EQ(aggregated->wire_bytes_sent_size(), std::get<0>(GetParam()).empty() ? 0 : 3);
    EXPECT_EQ(aggregated->segment_bytes(), SegmentBytesFor(spec, aggregated->bytes(), /*staged=*/false));
  }
}

INSTANTIATE_TEST_SUITE_P(WireCounting, SweepTest,
                         ::testing::Values(SweepParam{"", ""}, SweepParam{"lo", ""},
                                           SweepParam{"", "1000"}, SweepParam{"lo", "1000"},
                                           SweepParam{"", "auto"}),
                         [](const auto& info) {
                           const std::string& segment = std::get<1>(info.param);
                           return std::string(std::get<0>(info.param).empty() ? "off" : "on") +
                                  (segment.empty() ? "" : "_segment_" + segment);
                         });

proto::RankResult Result(int rank, std::vector<double> times, std::uint64_t sent) {
  proto::RankResult r;
  r.set_rank(rank);
  r.set_algorithm("ring");
  r.set_bytes(1000000);
  for (double t : times) r.add_iteration_us(t);
  r.set_payload_bytes_sent(sent);
  r.set_payload_bytes_received(sent);
  r.set_wrong(rank);
  r.set_transport("ucx(tcp)");
  r.set_ucx_environment("UCX_TCP_TX_SEG_SIZE=256K* UCX_TLS=tcp");
  return r;
}

TEST(AggregateTest, AnIterationTakesItsSlowestRanksTime) {
  proto::ExperimentSpec spec;
  spec.set_workers(2);
  const auto row = AggregateRow(spec, {Result(0, {10, 40}, 1000000), Result(1, {30, 20}, 1000000)});
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_DOUBLE_EQ(row->time_us_min(), 30);
  EXPECT_DOUBLE_EQ(row->time_us_p50(), 30);
  EXPECT_DOUBLE_EQ(row->time_us_p99(), 40);
  EXPECT_DOUBLE_EQ(row->time_us_max(), 40);
  EXPECT_DOUBLE_EQ(row->time_us_avg(), 35);
  EXPECT_DOUBLE_EQ(row->algbw_gbps(), 1e6 / 35e-6 / 1e9);
  EXPECT_DOUBLE_EQ(row->busbw_gbps(), row->algbw_gbps() * 2 * 1 / 2);
  EXPECT_EQ(row->payload_bytes_total(), 2000000u);
  EXPECT_EQ(row->theory_bytes_total(), 2000000u);  // ring, N = 2: 2(N-1)M
  EXPECT_EQ(row->wrong(), 1);
  EXPECT_EQ(row->rounds(), 2u);
  // What ran: the transport and the UCX settings, as the ranks recorded them.
  EXPECT_EQ(row->transport(), "ucx(tcp)");
  EXPECT_EQ(row->ucx_environment(), "UCX_TCP_TX_SEG_SIZE=256K* UCX_TLS=tcp");
}

// The median and the 99th percentile by nearest rank, over the slowest rank's
// time per iteration; the row says which segment size the ranks used.
TEST(AggregateTest, PercentilesOfTheSlowestRanksTimesAndTheSegment) {
  proto::ExperimentSpec spec;
  spec.set_workers(2);
  std::vector<double> slow(200), fast(200, 0.5);
  for (int i = 0; i < 200; ++i) slow[i] = 200 - i;  // 200, 199, ..., 1
  proto::RankResult a = Result(0, fast, 1000000), b = Result(1, slow, 1000000);
  a.set_segment_bytes(65536);
  b.set_segment_bytes(65536);
  const auto row = AggregateRow(spec, {a, b});
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_DOUBLE_EQ(row->time_us_p50(), 100);  // the 100th of 200
  EXPECT_DOUBLE_EQ(row->time_us_p99(), 198);  // the 198th
  EXPECT_DOUBLE_EQ(row->time_us_max(), 200);
  EXPECT_EQ(row->segment_bytes(), 65536u);
}

TEST(SpecTest, SegmentIsOffAutoOrAPositiveSize) {
  proto::ExperimentSpec spec;
  spec.set_workers(4);
  spec.add_algorithms("ring");
  spec.add_sizes(4096);
  ApplyDefaults(spec);
  for (const char* good : {"off", "auto", "1MiB", "4"}) {
    *spec.mutable_segment() = *ParseSegment(good);
    EXPECT_TRUE(ValidateSpec(spec).ok()) << good;
  }
  for (const char* bad : {"0", "-4", "often", "5GiB"}) {
    EXPECT_FALSE(ParseSegment(bad).ok()) << bad;
  }
  spec.mutable_segment()->set_bytes(0);  // a hand-made message
  EXPECT_NE(ValidateSpec(spec).message().find("segment"), std::string::npos);
  spec.mutable_segment()->set_bytes(1 << 20);
  EXPECT_EQ(SegmentBytesFor(spec, 4096, /*staged=*/false), std::size_t{1} << 20);
  *spec.mutable_segment() = *ParseSegment("off");
  EXPECT_EQ(SegmentBytesFor(spec, 64 << 20, /*staged=*/true), 0u);  // off means off
  *spec.mutable_segment() = *ParseSegment("auto");
  EXPECT_EQ(SegmentBytesFor(spec, 64 << 20, false), AutoSegmentBytes(64 << 20));
  // Unset: whole steps below 16 MiB, auto from there (DefaultSegmentBytes);
  // staged memory is always cut.
  spec.clear_segment();
  EXPECT_EQ(SegmentBytesFor(spec, 8 << 20, false), 0u);
  EXPECT_EQ(SegmentBytesFor(spec, 16 << 20, false), AutoSegmentBytes(16 << 20));
  EXPECT_EQ(SegmentBytesFor(spec, 64 << 20, false), AutoSegmentBytes(64 << 20));
  EXPECT_NE(SegmentBytesFor(spec, 64 << 20, false), 0u);
  EXPECT_EQ(SegmentBytesFor(spec, 8 << 20, true), StagedSegmentBytes(8 << 20));
  EXPECT_EQ(SegmentBytesFor(spec, 64 << 20, true), StagedSegmentBytes(64 << 20));
}

// nccl-tests' factors, at N = 4 where each differs from the others and from 1.
TEST(AggregateTest, BusBandwidthUsesEachCollectivesFactor) {
  proto::ExperimentSpec spec;
  spec.set_workers(4);
  for (const auto& [name, factor] : std::vector<std::pair<std::string, double>>{
           {"ring", 1.5}, {"ps", 1.5}, {"butterfly", 1.5}, {"reduce-scatter", 0.75},
           {"all-gather", 0.75}, {"broadcast", 1.0}, {"reduce", 1.0}}) {
    SCOPED_TRACE(name);
    std::vector<proto::RankResult> by_rank;
    for (int r = 0; r < 4; ++r) {
      by_rank.push_back(Result(r, {100}, 1000));
      by_rank.back().set_algorithm(name);
      if (name == "ps") by_rank.back().add_shard_payload_bytes(2000);
    }
    spec.set_servers(1);
    const auto row = AggregateRow(spec, by_rank);
    ASSERT_TRUE(row.ok()) << row.status();
    EXPECT_DOUBLE_EQ(row->algbw_gbps(), 1e6 / 100e-6 / 1e9);
    EXPECT_DOUBLE_EQ(row->busbw_gbps(), row->algbw_gbps() * factor);
    EXPECT_EQ(row->theory_bytes_total(),
              static_cast<std::uint64_t>(FindCollective(name)->formula_bytes(4, 1000000)));
  }
}

TEST(AggregateTest, RefusesMismatchedRanks) {
  proto::ExperimentSpec spec;
  spec.set_workers(2);
  EXPECT_FALSE(AggregateRow(spec, {Result(0, {1}, 1)}).ok());
  EXPECT_FALSE(AggregateRow(spec, {Result(0, {1}, 1), Result(1, {1, 2}, 1)}).ok());
  EXPECT_FALSE(AggregateRow(spec, {Result(1, {1}, 1), Result(0, {1}, 1)}).ok());
}

TEST(WorkerTest, PeerErrorHandlingIsOffOnlyForSharedMemoryOnlyTransports) {
  EXPECT_TRUE(WantPeerErrorHandling("auto", nullptr));
  EXPECT_TRUE(WantPeerErrorHandling("auto", "tcp"));
  EXPECT_TRUE(WantPeerErrorHandling("auto", "tcp,posix"));
  EXPECT_FALSE(WantPeerErrorHandling("auto", "posix,sysv,self"));
  EXPECT_FALSE(WantPeerErrorHandling("auto", "sm"));
  EXPECT_TRUE(WantPeerErrorHandling("on", "sm"));
  EXPECT_FALSE(WantPeerErrorHandling("off", "tcp"));
}

TEST(WorkerTest, WireBytesComeOnlyFromARanksOwnInterface) {
  EXPECT_EQ(RankNetDevice("", "eth0"), "eth0");
  EXPECT_EQ(RankNetDevice("", "eth0:1"), "eth0");
  EXPECT_EQ(RankNetDevice("", "lo"), "");       // shared by every local rank
  EXPECT_EQ(RankNetDevice("", "eth0,eth1"), "");
  EXPECT_EQ(RankNetDevice("", nullptr), "");
  EXPECT_EQ(RankNetDevice("veth3", "eth0"), "veth3");
  EXPECT_EQ(RankNetDevice("none", "eth0"), "");
  const auto lo = ReadInterfaceBytes("lo");
  ASSERT_TRUE(lo.has_value());  // every Linux machine has loopback counters
  EXPECT_FALSE(ReadInterfaceBytes("no-such-device0").has_value());
}

TEST(WorkerTest, WireBytesAreReadFromTheProcessesOwnNamespacesTable) {
  const std::string table =
      "Inter-|   Receive                                                |  Transmit\n"
      " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs "
      "drop fifo colls carrier compressed\n"
      "    lo:  500 5 0 0 0 0 0 0  500 5 0 0 0 0 0 0\n"
      " eth01: 7777 7 0 0 0 0 0 0 8888 8 0 0 0 0 0 0\n"
      "  eth0:1234567 90 0 0 0 0 0 0 7654321 80 0 0 0 0 0 0\n";
  const auto eth0 = ParseProcNetDev(table, "eth0");
  ASSERT_TRUE(eth0.has_value());
  EXPECT_EQ(eth0->received, 1234567u);  // no space after the colon at 7 digits
  EXPECT_EQ(eth0->sent, 7654321u);
  EXPECT_EQ(ParseProcNetDev(table, "eth01")->sent, 8888u);  // a longer name, not a prefix
  EXPECT_FALSE(ParseProcNetDev(table, "eth").has_value());
  EXPECT_FALSE(ParseProcNetDev(" eth0: 1 2 3\n", "eth0").has_value());  // a cut line
}

TEST(WorkerTest, TransportLabelListsTheEndpointsLanes) {
  const std::string info =
      "#                 lane[0]:  0:tcp/lo.0 md[0]  -> md[0]/tcp/sysdev[255] am am_bw#0\n"
      "#                 lane[1]:  3:cma/memory md[3] -> md[3]/cma rma_bw#0\n"
      "#                 lane[2]:  0:tcp/lo.0 md[0]  -> md[0]/tcp/sysdev[255] keepalive\n";
  EXPECT_EQ(UcxLanes(info), "tcp/lo.0+cma/memory");
  EXPECT_EQ(UcxLanes("no lanes here"), "");
}

}  // namespace
}  // namespace testbed
