// tcp-loopback-bench, the yardstick the parameter server's rate is held
// against: it moves exactly what it is asked to, through buffers walked chunk
// by chunk when they are larger than a chunk, and refuses sizes it cannot use.
#include <string>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/process_runner.h"

namespace {

using ::testing::HasSubstr;

std::pair<int, std::string> RunBench(const std::string& args) {
  return testbed::testing::RunProgram(TCP_LOOPBACK_BENCH_PATH, args);
}

TEST(TcpLoopbackBenchTest, SendsExactlyTheBytesAskedFor) {
  const auto [status, output] = RunBench("--bytes 10MiB --chunk 1MiB");
  EXPECT_EQ(status, 0) << output;
  EXPECT_THAT(output, HasSubstr("\"bytes\": 10485760,"));
  EXPECT_THAT(output, HasSubstr("\"gbps\": "));
}

TEST(TcpLoopbackBenchTest, WalksABufferThatChunksDoNotDivide) {
  // 7 MiB walked 3 MiB at a time wraps mid-chunk: calls shorten at its end.
  const auto [status, output] = RunBench("--bytes 23MiB --chunk 3MiB --buffer 7MiB");
  EXPECT_EQ(status, 0) << output;
  EXPECT_THAT(output, HasSubstr("\"bytes\": 24117248,"));
}

TEST(TcpLoopbackBenchTest, RefusesABufferSmallerThanAChunk) {
  const auto [status, output] = RunBench("--bytes 1MiB --chunk 1MiB --buffer 4KiB");
  EXPECT_EQ(status, 2);
  EXPECT_THAT(output, HasSubstr("--buffer"));
}

TEST(TcpLoopbackBenchTest, RefusesMalformedSizes) {
  const auto [status, output] = RunBench("--bytes 1MiB --chunk lots");
  EXPECT_EQ(status, 2);
  EXPECT_THAT(output, HasSubstr("--chunk"));
}

}  // namespace
