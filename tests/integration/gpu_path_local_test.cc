// --gpu-path through `testbed local`'s real daemons over UCX. On a UCX that
// reports no CUDA memory (Debian's; any UCX on a machine without a GPU),
// direct is refused by every worker before anything runs - exit 1 and one
// line naming the reason, not a crash inside UCX - and auto stages.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "allreduce/transport/ucx_settings.h"
#include "allreduce/transport/ucx_transport.h"
#include "tests/process_runner.h"

namespace testbed {
namespace {

using testing::JsonField;
using testing::Lines;
using testing::TempDir;
using testing::TestbedProcess;

// Whether the UCX the daemons link (the same as this test's) moves CUDA memory.
bool UcxMovesCuda() {
  absl::StatusOr<std::unique_ptr<UcxTransport>> probe = UcxTransport::Create(0, 1);
  return probe.ok() && UcxHandlesCuda((*probe)->memory_types());
}

TEST(LocalGpuPath, DirectIsRefusedBeforeAnythingRunsWhereUcxHasNoCuda) {
  if (UcxMovesCuda()) GTEST_SKIP() << "this UCX moves CUDA memory: direct is allowed";
  const std::string dir = TempDir("gpu-direct");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "2", "--algorithms", "ring", "--sizes", "4004",
                          "--iters", "1", "--memory", "fake-device", "--gpu-path", "direct",
                          "--format", "json", "--timeout", "30"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(2));
  ASSERT_TRUE(status.has_value()) << "testbed local did not finish\n" << testbed.Stderr();
  EXPECT_EQ(*status, 1) << testbed.Stderr();  // an error, not a signal
  EXPECT_EQ(testbed.Stdout(), "");            // no row: nothing ran
  const std::regex refusal(
      "error: .*gpu_path direct refused: this UCX reports no CUDA memory \\(memory_types 0x1, "
      "no CUDA bit\\)[^\n]*use gpu_path staged\n");
  EXPECT_TRUE(std::regex_search(testbed.Stderr(), refusal)) << testbed.Stderr();
  std::filesystem::remove_all(dir);
}

TEST(LocalGpuPath, AutoStagesWhereUcxHasNoCuda) {
  if (UcxMovesCuda()) GTEST_SKIP() << "this UCX moves CUDA memory";
  const std::string dir = TempDir("gpu-auto");
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--workers", "2", "--algorithms", "ring,ps", "--sizes",
                          "4004", "--iters", "1", "--memory", "fake-device", "--gpu-path",
                          "auto", "--format", "json", "--timeout", "30"},
                         dir);
  const auto status = testbed.Wait(std::chrono::minutes(2));
  ASSERT_TRUE(status.has_value()) << "testbed local did not finish\n" << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 2u) << testbed.Stdout();
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    EXPECT_EQ(JsonField(row, "wrong"), "0");
    EXPECT_EQ(JsonField(row, "gpu_path"), "staged");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace testbed
