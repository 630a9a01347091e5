// `testbed local` for real: a coordinator and N worker daemons on loopback,
// every all-reduce algorithm over UCX, odd sizes. Every row must be exact
// (wrong == 0) and move exactly the bytes theory says.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "tests/process_runner.h"

namespace testbed {
namespace {

using testing::JsonField;
using testing::Lines;
using testing::TempDir;
using testing::TestbedProcess;


class LocalSweep : public ::testing::TestWithParam<int> {};

TEST_P(LocalSweep, EveryAlgorithmIsExactAndMovesTheoryBytes) {
  const int n = GetParam();
  const std::string dir = TempDir("sweep");
  // Element counts 1, 7, 1001 and 65537 (odd, never divisible by N > 1), float32.
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", std::to_string(n), "--algorithms",
                          "naive,ring,tree,butterfly", "--sizes", "4,28,4004,262148", "--iters",
                          "2", "--warmup", "1", "--format", "json", "--out", dir + "/r.jsonl",
                          "--timeout", "60"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(4));
  ASSERT_TRUE(status.has_value()) << "testbed local did not finish\n" << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();

  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 16u) << testbed.Stdout();
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    EXPECT_EQ(JsonField(row, "workers"), std::to_string(n));
    EXPECT_EQ(JsonField(row, "wrong"), "0");
    EXPECT_EQ(JsonField(row, "payload_bytes_total"), JsonField(row, "theory_bytes_total"));
    if (n > 1) {
      EXPECT_NE(JsonField(row, "theory_bytes_total"), "0");
    }
    EXPECT_EQ(JsonField(row, "iterations"), "2");
    EXPECT_GT(std::atof(JsonField(row, "time_us_avg").c_str()), 0);
  }
  // The results file: the experiment record, then the same rows.
  const std::vector<std::string> file = Lines(testing::ReadFile(dir + "/r.jsonl"));
  ASSERT_EQ(file.size(), 17u);
  EXPECT_EQ(JsonField(file[0], "record"), "experiment");
  EXPECT_NE(file[0].find("\"git_revision\""), std::string::npos);
  EXPECT_NE(file[0].find("\"spec\": {"), std::string::npos);
  EXPECT_EQ(JsonField(file[1], "record"), "result");
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Workers, LocalSweep, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return "N" + std::to_string(info.param); });

// Pipelined over real UCX: every scheduled all-reduce cut into segments of
// 1000 bytes (250 floats: 1001 and 65537 elements do not divide into them, 1
// and 7 fit in one), exact and moving exactly the theory's bytes; the rows say
// which segment size ran.
TEST(LocalSegmented, EveryAlgorithmPipelinedIsExactAndMovesTheoryBytes) {
  const std::string dir = TempDir("segmented");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "3", "--algorithms",
                          "naive,ring,tree,butterfly,halving-doubling", "--sizes",
                          "4,28,4004,262148", "--iters", "2", "--warmup", "1", "--segment", "1000",
                          "--format", "json", "--timeout", "60"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(4));
  ASSERT_TRUE(status.has_value()) << "testbed local did not finish\n" << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 20u) << testbed.Stdout();
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    EXPECT_EQ(JsonField(row, "wrong"), "0");
    EXPECT_EQ(JsonField(row, "payload_bytes_total"), JsonField(row, "theory_bytes_total"));
    EXPECT_NE(JsonField(row, "theory_bytes_total"), "0");
    EXPECT_EQ(JsonField(row, "segment_bytes"), "1000");
    EXPECT_GT(std::atof(JsonField(row, "time_us_p50").c_str()), 0);
  }
  std::filesystem::remove_all(dir);
}

// Device memory without a GPU: every all-reduce and ps on fake-device memory
// (pages no code but the memory's own operations may touch), through the real
// daemons over UCX - so the sweep, the executor, the UCX staging and the ps
// client's staging all go through the memory's operations, or the worker
// crashes. Exact, the theory's bytes, and the rows say how it travelled.
TEST(LocalMemory, FakeDeviceMemoryRunsEveryAlgorithmStagedAndExact) {
  const std::string dir = TempDir("fake-device");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "3", "--algorithms",
                          "naive,ring,tree,butterfly,halving-doubling,ps", "--sizes",
                          "4,4004,1000004", "--iters", "2", "--warmup", "1", "--memory",
                          "fake-device", "--format", "json", "--timeout", "60"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(4));
  ASSERT_TRUE(status.has_value()) << "testbed local did not finish\n" << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 18u) << testbed.Stdout();
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    EXPECT_EQ(JsonField(row, "wrong"), "0");
    EXPECT_EQ(JsonField(row, "payload_bytes_total"), JsonField(row, "theory_bytes_total"));
    EXPECT_EQ(JsonField(row, "memory"), "fake-device");
    EXPECT_EQ(JsonField(row, "gpu_path"), "staged");
  }
  std::filesystem::remove_all(dir);
}

// CUDA memory runs where there is a GPU; elsewhere the run fails at once with
// the one line saying why (the build has no CUDA, or the CUDA error).
TEST(LocalMemory, CudaMemoryRunsOrFailsSayingWhy) {
  const std::string dir = TempDir("cuda");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "2", "--algorithms", "ring,ps", "--sizes",
                          "4004", "--iters", "1", "--warmup", "0", "--memory", "cuda",
                          "--format", "json", "--timeout", "30"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(2));
  ASSERT_TRUE(status.has_value()) << "testbed local did not finish\n" << testbed.Stderr();
  if (*status == 0) {
    for (const std::string& row : Lines(testbed.Stdout())) {
      SCOPED_TRACE(row);
      EXPECT_EQ(JsonField(row, "wrong"), "0");
      EXPECT_EQ(JsonField(row, "memory"), "cuda");
    }
  } else {
    EXPECT_EQ(*status, 1);
    EXPECT_TRUE(std::regex_search(testbed.Stderr(),
                                  std::regex("error: .*(no CUDA device: cudaError|TESTBED_CUDA)")))
        << testbed.Stderr();
  }
  std::filesystem::remove_all(dir);
}

// reduce-scatter, all-gather, broadcast and reduce run in the harness like the
// all-reduces: checked results, payload equal to the closed form, and
// nccl-tests' bus-bandwidth factor ((N-1)/N for the first two, 1 for the rooted).
TEST(LocalCollectives, EveryCollectiveRunsExactWithItsBusFactor) {
  const std::string dir = TempDir("collectives");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "3", "--algorithms",
                          "reduce-scatter,all-gather,broadcast,reduce", "--sizes", "4004",
                          "--dtype", "int32", "--op", "max", "--iters", "2", "--warmup", "0",
                          "--format", "json"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(2));
  ASSERT_TRUE(status.has_value()) << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 4u) << testbed.Stdout();
  const std::map<std::string, std::pair<std::string, double>> expected = {
      {"reduce-scatter", {"8008", 2.0 / 3}}, {"all-gather", {"8008", 2.0 / 3}},
      {"broadcast", {"8008", 1.0}}, {"reduce", {"8008", 1.0}}};
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    const auto& [theory, factor] = expected.at(JsonField(row, "algorithm"));
    EXPECT_EQ(JsonField(row, "wrong"), "0");
    EXPECT_EQ(JsonField(row, "theory_bytes_total"), theory);  // (N-1)M
    EXPECT_EQ(JsonField(row, "payload_bytes_total"), theory);
    const double algbw = std::atof(JsonField(row, "algbw_gbps").c_str());
    EXPECT_NEAR(std::atof(JsonField(row, "busbw_gbps").c_str()), algbw * factor, algbw * 1e-9);
  }
  std::filesystem::remove_all(dir);
}

// --dtype float16 over UCX: every all-reduce exact (inputs whose sums are
// integers a half holds) and moving its closed form for 2-byte elements
// (2002 bytes: 1001 halves; ring at N = 3 moves 2(N-1)M = 8008).
TEST(LocalFloat16, EveryAllReduceIsExactAtTwoBytesAnElement) {
  const std::string dir = TempDir("float16");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "3", "--algorithms",
                          "naive,ring,tree,butterfly,halving-doubling", "--sizes", "2002",
                          "--dtype", "float16", "--iters", "2", "--warmup", "0", "--format",
                          "json"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(2));
  ASSERT_TRUE(status.has_value()) << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 5u) << testbed.Stdout();
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    EXPECT_EQ(JsonField(row, "wrong"), "0");
    EXPECT_EQ(JsonField(row, "payload_bytes_total"), JsonField(row, "theory_bytes_total"));
    if (JsonField(row, "algorithm") == "ring") {
      EXPECT_EQ(JsonField(row, "theory_bytes_total"), "8008");
    }
  }
  std::filesystem::remove_all(dir);
}

// A results file that cannot take the rows fails the run at once, with the
// path and the system's reason, and leaves no course table behind.
// --algorithms auto: a calibration run first (at the requested sizes), then per
// size the algorithm measured fastest there - exact, moving its theory's
// bytes, and saying why.
TEST(LocalAuto, CalibratesThenRunsAChosenAlgorithmPerSize) {
  const std::string dir = TempDir("auto");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "3", "--algorithms", "auto", "--sizes",
                          "4,4004,262148", "--iters", "2", "--warmup", "1", "--format", "json",
                          "--out", dir + "/r.jsonl", "--timeout", "60"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(4));
  ASSERT_TRUE(status.has_value()) << "testbed local did not finish\n" << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  EXPECT_NE(testbed.Stderr().find("testbed: auto: calibrating ps, naive, ring"), std::string::npos)
      << testbed.Stderr();
  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 3u) << testbed.Stdout();  // calibration rows are not results
  std::set<std::string> sizes;
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    sizes.insert(JsonField(row, "bytes"));
    EXPECT_EQ(JsonField(row, "wrong"), "0");
    EXPECT_EQ(JsonField(row, "payload_bytes_total"), JsonField(row, "theory_bytes_total"));
    // The calibration ran these very sizes, so their medians decide.
    const std::string chosen_by = JsonField(row, "chosen_by");
    EXPECT_EQ(chosen_by.rfind(JsonField(row, "algorithm") + ": measured ", 0), 0u);
    EXPECT_NE(chosen_by.find("(alpha-beta fitted to a calibration run)"), std::string::npos);
  }
  EXPECT_EQ(sizes, (std::set<std::string>{"4", "4004", "262148"}));
  std::filesystem::remove_all(dir);
}

// With --tuning the constants come from a results file: no calibration, and
// a file in which only tree has rows makes tree the choice at every size.
TEST(LocalAuto, TuningFromAResultsFileSkipsCalibration) {
  const std::string dir = TempDir("auto-tuning");
  {
    std::ofstream tuning(dir + "/tuning.jsonl");
    for (const char* bytes : {"8", "1048576"}) {
      tuning << R"({"record": "result", "algorithm": "tree", "workers": 2, "bytes": )" << bytes
             << R"(, "time_us_avg": 100, "time_us_p50": 100, "transport": "ucx:tcp/lo.0"})"
             << "\n";
    }
  }
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "2", "--algorithms", "ring,auto", "--sizes",
                          "8,4096", "--iters", "2", "--format", "json", "--tuning",
                          dir + "/tuning.jsonl", "--timeout", "60"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(2));
  ASSERT_TRUE(status.has_value()) << "testbed local did not finish\n" << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  EXPECT_EQ(testbed.Stderr().find("calibrating"), std::string::npos) << testbed.Stderr();
  EXPECT_NE(testbed.Stderr().find("auto: leaves out ring: no rows of it"), std::string::npos);
  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 4u) << testbed.Stdout();
  int chosen = 0;
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    EXPECT_EQ(JsonField(row, "wrong"), "0");
    if (JsonField(row, "chosen_by").empty()) {
      EXPECT_EQ(JsonField(row, "algorithm"), "ring");
      continue;
    }
    ++chosen;
    EXPECT_EQ(JsonField(row, "algorithm"), "tree");
    const std::string chosen_by = JsonField(row, "chosen_by");
    EXPECT_NE(chosen_by.find("fitted to " + dir + "/tuning.jsonl"), std::string::npos);
    // 8 B was measured in the file; 4 KiB lies between its two sizes.
    EXPECT_EQ(chosen_by.rfind(JsonField(row, "bytes") == "8" ? "tree: measured 100 us"
                                                             : "tree: interpolated 100 us",
                              0),
              0u)
        << chosen_by;
  }
  EXPECT_EQ(chosen, 2);
  std::filesystem::remove_all(dir);
}

TEST(LocalFailure, AnUnwritableResultsFileFailsTheRunAtOnce) {
  const std::string dir = TempDir("full");
  std::filesystem::remove("/dev/full.md");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "2", "--algorithms", "ring", "--sizes", "4",
                          "--iters", "1", "--warmup", "0", "--out", "/dev/full"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(1));
  ASSERT_TRUE(status.has_value()) << testbed.Stderr();
  EXPECT_NE(*status, 0);
  EXPECT_NE(testbed.Stderr().find("/dev/full: No space left on device"), std::string::npos)
      << testbed.Stderr();
  EXPECT_EQ(testbed.Stderr().find("results appended"), std::string::npos) << testbed.Stderr();
  EXPECT_FALSE(std::filesystem::exists("/dev/full.md"));
  std::filesystem::remove_all(dir);
}

// A hung worker (stopped, not dead: its sockets stay open) is caught by the
// coordinator's heartbeat deadline; the run fails naming its rank, and every
// daemon ends, the stopped one included.
TEST(LocalFailure, AHungWorkerFailsTheRunAndEveryDaemonEnds) {
  const std::string dir = TempDir("hung");
  testing::DaemonReaper reaper;  // ends, by PID, whatever outlives the test
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "3", "--algorithms", "ring", "--sizes", "64KiB",
                          "--iters", "1000000", "--warmup", "0", "--timeout", "4", "--log-dir",
                          dir + "/logs"},
                         dir);
  const std::optional<testing::DaemonPids> pids = testing::ParseDaemonPids(
      testbed.WaitForStderr("testbed-worker pids", std::chrono::seconds(30)));
  ASSERT_TRUE(pids.has_value()) << testbed.Stderr();
  reaper.Add(pids->all());
  ASSERT_EQ(pids->workers.size(), 3u);
  // The error must name the victim's rank (from its own log) and pid as
  // silent, whichever rank timed out first. Stop it only once its sweep has
  // started: stopped earlier, during the handshakes, the others are not yet in
  // a collective with it, and only the coordinator's 10 s heartbeat deadline
  // catches it (another path, with its own test in coordinator_core_test).
  const std::optional<int> rank = testing::LoggedNumber(
      dir + "/logs/worker-2.log", "rank ([0-9]+) of 3", std::chrono::seconds(60));
  ASSERT_TRUE(rank.has_value()) << testing::ReadFile(dir + "/logs/worker-2.log");
  ASSERT_TRUE(testing::LoggedNumber(dir + "/logs/worker-2.log", "experiment ([0-9]+): sweep started",
                                    std::chrono::seconds(60))
                  .has_value())
      << testing::ReadFile(dir + "/logs/worker-2.log");
  const pid_t victim = pids->workers[2];
  ASSERT_EQ(kill(victim, SIGSTOP), 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  const auto status = testbed.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value()) << "testbed local still running 60 s after a worker hung";
  const auto took = std::chrono::steady_clock::now() - stopped_at;
  std::cerr << "hung worker: the run ended "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
            << " ms after the SIGSTOP (timeout 4 s)\n";
  EXPECT_NE(*status, 0);
  EXPECT_TRUE(std::regex_search(
      testbed.Stderr(),
      std::regex("error: .*rank " + std::to_string(*rank) + " \\(worker 2 \\([^)]* pid " +
                 std::to_string(victim) + "\\)\\) has sent no heartbeat")))
      << testbed.Stderr();
  // The two others left on the coordinator's Abort, and the harness says so;
  // the stopped one it ended itself.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(testing::ExitReport(testbed.Stderr(), "testbed-worker " + std::to_string(i),
                                  pids->workers[i]),
              "exited with status 1")
        << testbed.Stderr();
  }
  const std::vector<pid_t> survivors = testing::Survivors(pids->all(), std::chrono::seconds(10));
  EXPECT_TRUE(survivors.empty()) << survivors.size() << " daemons survived the run";
  std::filesystem::remove_all(dir);
}

TEST(LocalFailure, KilledWorkerFailsTheRunNamingTheLostRank) {
  const std::string dir = TempDir("kill");
  testing::DaemonReaper reaper;  // ends, by PID, whatever outlives the test
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "4", "--algorithms", "ring", "--sizes", "4MiB",
                          "--iters", "100000", "--warmup", "0", "--log-dir", dir + "/logs"},
                         dir);
  const std::optional<testing::DaemonPids> pids = testing::ParseDaemonPids(
      testbed.WaitForStderr("testbed-worker pids", std::chrono::seconds(30)));
  ASSERT_TRUE(pids.has_value()) << testbed.Stderr();
  reaper.Add(pids->all());
  ASSERT_EQ(pids->workers.size(), 4u);
  const std::vector<pid_t>& workers = pids->workers;
  // Wait until the sweep runs: every worker has logged its rank ("rank R of 4").
  std::vector<std::optional<int>> ranks(4);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int ranked = 0;
  while (ranked < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ranked = 0;
    for (int i = 0; i < 4; ++i) {
      ranks[i] = testing::LoggedNumber(dir + "/logs/worker-" + std::to_string(i) + ".log",
                                       "rank ([0-9]+) of 4");
      ranked += ranks[i].has_value();
    }
  }
  ASSERT_EQ(ranked, 4) << testbed.Stderr();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // mid-collective

  const int victim_index = 1;
  const pid_t victim = workers[victim_index];
  // The lost rank is the one the victim's own log gave it, not whatever the
  // report names.
  const std::string victim_rank = std::to_string(*ranks[victim_index]);
  // One numbering: the harness's "testbed-worker 1" (and worker-1.log) is the
  // coordinator's worker 1, which holds rank 1 of the experiment.
  EXPECT_EQ(*ranks[victim_index], victim_index);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  const auto killed_at = std::chrono::steady_clock::now();
  const auto status = testbed.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value()) << "testbed local still running 60 s after a worker died";
  const auto took = std::chrono::steady_clock::now() - killed_at;
  std::cerr << "killed worker: the run ended "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
            << " ms after the SIGKILL\n";
  EXPECT_LT(took, std::chrono::seconds(30));
  EXPECT_EQ(*status, 1);

  const std::string report = testbed.Stderr();
  EXPECT_TRUE(std::regex_search(report, std::regex("lost rank " + victim_rank + " \\(worker " +
                                                   std::to_string(victim_index) + " \\([^)]* pid " +
                                                   std::to_string(victim) + "\\)\\)")))
      << "victim rank " << victim_rank << ", pid " << victim << "\n" << report;
  // Exits, as the harness saw them (see ExitReport): the victim by our
  // signal, every other worker by a failure of its own.
  const std::string victim_exit =
      testing::ExitReport(report, "testbed-worker " + std::to_string(victim_index), victim);
  EXPECT_EQ(victim_exit, "was killed by signal 9") << report;
  // Every other worker's log names the lost rank (seen by UCX as a lost
  // connection, or told by the coordinator).
  const std::regex names_victim("lost (connection to )?rank " + victim_rank + "\\b");
  for (int i = 0; i < 4; ++i) {
    if (i == victim_index) continue;
    const std::string exit =
        testing::ExitReport(report, "testbed-worker " + std::to_string(i), workers[i]);
    EXPECT_EQ(exit, "exited with status 1") << report;
    const std::string log = testing::ReadFile(dir + "/logs/worker-" + std::to_string(i) + ".log");
    EXPECT_TRUE(std::regex_search(log, names_victim)) << "victim rank " << victim_rank << "\n" << log;
  }
  // Nothing is left running: the server and every worker.
  const std::vector<pid_t> survivors = testing::Survivors(pids->all(), std::chrono::seconds(10));
  EXPECT_TRUE(survivors.empty()) << "survived: " << ::testing::PrintToString(survivors);
  std::filesystem::remove_all(dir);
}

TEST(LocalFailure, CtrlCEndsEveryProcessItStarted) {
  const std::string dir = TempDir("sigint");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "3", "--algorithms", "ring", "--sizes", "1MiB",
                          "--iters", "100000"},
                         dir);
  std::smatch pids;
  const std::string err = testbed.WaitForStderr("testbed-worker pids", std::chrono::seconds(30));
  ASSERT_TRUE(testing::WaitForSweeps(testing::LogDir(err), 3, std::chrono::seconds(30))) << err;
  ASSERT_TRUE(std::regex_search(err, pids, std::regex("server pids ([0-9]+) .*testbed-worker pids ([0-9]+) ([0-9]+) ([0-9]+)")))
      << err;
  ASSERT_EQ(kill(testbed.pid(), SIGINT), 0);
  const auto status = testbed.Wait(std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value()) << "testbed local ignored Ctrl-C";
  EXPECT_EQ(*status, 130) << testbed.Stderr();
  for (int i = 1; i <= 4; ++i) {
    const pid_t pid = std::stoi(pids[i].str());
    EXPECT_NE(kill(pid, 0), 0) << "pid " << pid << " survived Ctrl-C";
  }
  std::filesystem::remove_all(dir);
}

TEST(LocalTransports, SharedMemoryIsExactToo) {
  const std::string dir = TempDir("shm");
  setenv("UCX_TLS", "posix,sysv,cma,self", 1);
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "3", "--algorithms", "naive,ring,tree,butterfly",
                          "--sizes", "4,4004", "--iters", "2", "--format", "json"},
                         dir);
  unsetenv("UCX_TLS");
  const auto status = testbed.Wait(std::chrono::minutes(2));
  ASSERT_TRUE(status.has_value());
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 8u);
  for (const std::string& row : rows) {
    EXPECT_EQ(JsonField(row, "wrong"), "0") << row;
    EXPECT_EQ(JsonField(row, "payload_bytes_total"), JsonField(row, "theory_bytes_total")) << row;
    EXPECT_EQ(JsonField(row, "transport").find("tcp"), std::string::npos) << row;
  }
  std::filesystem::remove_all(dir);
}

TEST(LocalFailure, BadSpecFileIsReportedWithLineAndColumn) {
  const std::string dir = TempDir("spec");
  std::ofstream(dir + "/bad.textproto") << "workers: 2\nalgorithms: \"ring\"\nsizes: 4096\niterations: \"many\"\n";
  TestbedProcess testbed(TESTBED_CLI_PATH, {"local", "--spec", dir + "/bad.textproto"}, dir);
  const auto status = testbed.Wait(std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 2);
  EXPECT_NE(testbed.Stderr().find("bad.textproto:4:13"), std::string::npos) << testbed.Stderr();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace testbed
