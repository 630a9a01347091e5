// tcp-loopback-bench, the yardstick the parameter server's rate is held
// against: it moves exactly what it is asked to, through buffers walked chunk
// by chunk when they are larger than a chunk, and refuses sizes it cannot use.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace {

using ::testing::HasSubstr;

std::pair<int, std::string> RunBench(const std::string& args) {
  const std::string command = std::string(TCP_LOOPBACK_BENCH_PATH) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  std::array<char, 4096> buf;
  while (std::size_t n = fread(buf.data(), 1, buf.size(), pipe)) output.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
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
