// `testbed workload --run` (experiments/cli/workload_run.h) on real daemons
// over loopback: a small 3-D parallel step (t = 2, p = 2, d = 2, ZeRO 1)
// replayed collective by collective, each with its communicator's groups -
// tensor-parallel pairs, data-parallel pairs, the pipeline's hand-offs -
// every group exact, its payload its closed form and its vector the trace's,
// and the step's verdict from the measured times.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/process_runner.h"

namespace testbed {
namespace {

using testing::JsonField;
using testing::Lines;
using testing::TempDir;
using testing::TestbedProcess;

TEST(WorkloadRun, EveryCollectiveOfAThreeDimensionalStepRunsExactInItsGroups) {
  const std::string dir = TempDir("workload-run");
  TestbedProcess testbed(
      TESTBED_CLI_PATH,
      {"workload", "--model", "gpt2", "--layers", "2", "--hidden", "64", "--sequence", "16",
       "--vocabulary", "256", "--micro-batch", "2", "--tp", "2", "--pp", "2", "--dp", "2",
       "--micro-batches", "2", "--zero", "1", "--run", "--device-tflops", "1", "--iters", "1",
       "--format", "json"},
      dir);
  const auto status = testbed.Wait(std::chrono::minutes(4));
  ASSERT_TRUE(status.has_value()) << "testbed workload --run did not finish\n" << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  std::map<std::string, std::set<std::string>> groups;  // by role and operation: group_ranks
  int traffic_lines = 0, steps = 0;
  for (const std::string& row : Lines(testbed.Stdout())) {
    SCOPED_TRACE(row);
    if (row.find("\"verdict\"") != std::string::npos) {
      ++steps;
      EXPECT_EQ(JsonField(row, "verdict"), "communication-bound");
    } else if (row.find("\"agrees\"") != std::string::npos) {
      ++traffic_lines;
      EXPECT_EQ(JsonField(row, "agrees"), "yes");
      EXPECT_GT(std::stod(JsonField(row, "measured_s")), 0);
    } else if (row.find("\"group_ranks\"") != std::string::npos) {
      EXPECT_EQ(JsonField(row, "wrong"), "0");
      EXPECT_EQ(JsonField(row, "payload_bytes"), JsonField(row, "theory_bytes"));
      EXPECT_GT(std::stod(JsonField(row, "payload_bytes")), 0);
      groups[JsonField(row, "group") + " " + JsonField(row, "operation")].insert(
          JsonField(row, "group_ranks"));
    }
  }
  EXPECT_EQ(traffic_lines, 5);  // dp all-reduce and all-gather, tp all-reduce, sends, compute
  EXPECT_EQ(steps, 1);
  // Megatron's order, tensor-parallel index fastest: tp pairs of neighbours,
  // dp pairs two apart within a stage, hand-offs four apart.
  EXPECT_EQ(groups["tensor-parallel all-reduce"],
            (std::set<std::string>{"0;1", "2;3", "4;5", "6;7"}));
  EXPECT_EQ(groups["data-parallel all-gather"],
            (std::set<std::string>{"0;2", "1;3", "4;6", "5;7"}));
  EXPECT_EQ(groups["pipeline send-recv"],
            (std::set<std::string>{"0;4", "1;5", "2;6", "3;7"}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace testbed
