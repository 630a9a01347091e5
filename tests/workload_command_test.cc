// `testbed workload` as a user meets it: every line beside its closed form,
// the recorded workload specs, the trace written and read back, the replay's
// verdict, and what it refuses.
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/process_runner.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using testing::JsonField;
using testing::RunCli;
using testing::TempDir;

std::vector<std::string> JsonRows(const std::string& text) {
  std::vector<std::string> rows;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind('{', 0) == 0) rows.push_back(line);
  }
  return rows;
}

TEST(WorkloadCommandTest, EveryLineAgreesWithTheCourseForTheRecordedSpecs) {
  for (const char* spec : {"gpt2-fsdp", "megatron-3d", "tensor-parallel-racks"}) {
    const auto [code, out] = RunCli(std::string("workload --workload ") + TESTBED_SOURCE_DIR +
                                    "/experiments/workloads/" + spec + ".textproto --format json");
    ASSERT_EQ(code, 0) << out;
    const std::vector<std::string> rows = JsonRows(out);
    ASSERT_GE(rows.size(), 2u) << out;
    for (const std::string& row : rows) EXPECT_EQ(JsonField(row, "agrees"), "yes") << row;
  }
}

TEST(WorkloadCommandTest, PrintsMemoryAndBubbleAndReadsBackItsTrace) {
  const std::string dir = TempDir("workload_command");
  const std::string trace = dir + "/step.json";
  const auto [code, out] =
      RunCli("workload --model gpt2 --tp 2 --pp 4 --dp 2 --micro-batches 32 --out " + trace);
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("bubble (p-1)/(m+p-1) = 0.0857"));
  EXPECT_THAT(out, HasSubstr("<- this step"));
  ASSERT_TRUE(std::filesystem::exists(trace));
  const auto [read_code, read_out] = RunCli("workload --trace " + trace + " --format json");
  ASSERT_EQ(read_code, 0) << read_out;
  // Read back, the trace carries what it was generated from: the same closed forms.
  for (const std::string& row : JsonRows(read_out)) {
    EXPECT_EQ(JsonField(row, "agrees"), "yes") << row;
  }
  std::filesystem::remove_all(dir);
}

TEST(WorkloadCommandTest, ReplaysTensorParallelismInsideAndAcrossRacks) {
  const auto step = [](const std::string& placement) {
    const auto [code, out] = RunCli(std::string("workload --workload ") + TESTBED_SOURCE_DIR +
                                    "/experiments/workloads/tensor-parallel-racks.textproto "
                                    "--racks 2 --oversubscription 4 --placement " +
                                    placement +
                                    " --simulate --link-rate 100gbit --device-tflops 100 "
                                    "--format json");
    EXPECT_EQ(code, 0) << out;
    const std::vector<std::string> rows = JsonRows(out);
    EXPECT_FALSE(rows.empty()) << out;
    return rows.empty() ? std::string() : rows.back();
  };
  const std::string inside = step("packed"), across = step("round-robin");
  EXPECT_GT(std::stod(JsonField(across, "step_s")), 2 * std::stod(JsonField(inside, "step_s")));
  EXPECT_EQ(JsonField(across, "verdict"), "communication-bound");
  // The step's row says which replay it is, beside a measured one's in the same output.
  EXPECT_EQ(JsonField(across, "replay"), "simulated");
}

TEST(WorkloadCommandTest, RefusesWithOneLineSayingWhy) {
  const auto refused = [](const std::string& args, const std::string& why) {
    const auto [code, out] = RunCli("workload " + args);
    EXPECT_NE(code, 0) << args;
    EXPECT_THAT(out, HasSubstr(why)) << args;
  };
  refused("--model gpt5", "unknown model 'gpt5'");
  refused("--model gpt2 --tp 5", "must divide the hidden size 768");
  refused("--model gpt2 --pp 2 --zero 3", "DeepSpeed");
  refused("--model mlp --layers 4", "size a transformer");
  refused("--model gpt2 --dp 2 --simulate", "needs --link-rate and --device-tflops");
  refused("--model gpt2 --zero 4", "--zero");
}

}  // namespace
}  // namespace testbed
