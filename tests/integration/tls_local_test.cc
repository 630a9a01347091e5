// TLS with the real daemons: `testbed local --tls-dir` runs ring and ps over
// mutual TLS (a second server joins the coordinator over it too), with
// certificates made by `openssl` for the test; testbed-server warns once, at
// start, when it listens off loopback without TLS, and names a missing file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "tests/process_runner.h"
#include "tests/tls_certs.h"

namespace testbed {
namespace {

using testing::JsonField;
using testing::Lines;
using testing::TempDir;
using testing::TestbedProcess;

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class TlsDaemons : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::HaveOpenssl()) GTEST_SKIP() << "no openssl command (.ci/install-deps)";
    dir_ = TempDir("tls");
    std::filesystem::create_directory(dir_ + "/certs");
    ASSERT_EQ(testing::MakeTlsDir(dir_ + "/certs", "testbed"), "");
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) std::filesystem::remove_all(dir_);
  }
  std::string dir_;
};

TEST_F(TlsDaemons, LocalRunsRingAndPsOverMutualTls) {
  testing::DaemonReaper reaper;  // ends, by PID, whatever outlives the test
  TestbedProcess testbed(TESTBED_CLI_PATH,
                         {"local", "--tls-dir", dir_ + "/certs", "--workers", "2", "--servers",
                          "2", "--algorithms", "ring,ps", "--sizes", "4KiB", "--iters", "1",
                          "--format", "json", "--log-dir", dir_ + "/logs", "--timeout", "60"},
                         dir_);
  const std::optional<testing::DaemonPids> pids = testing::ParseDaemonPids(
      testbed.WaitForStderr("testbed-worker pids", std::chrono::seconds(60)));
  ASSERT_TRUE(pids.has_value()) << testbed.Stderr();
  reaper.Add(pids->all());
  const auto status = testbed.Wait(std::chrono::minutes(3));
  ASSERT_TRUE(status.has_value()) << "testbed local did not finish\n" << testbed.Stderr();
  ASSERT_EQ(*status, 0) << testbed.Stderr();
  const std::vector<std::string> rows = Lines(testbed.Stdout());
  ASSERT_EQ(rows.size(), 2u) << testbed.Stdout();
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    EXPECT_EQ(JsonField(row, "wrong"), "0");
    EXPECT_EQ(JsonField(row, "workers"), "2");
  }
  const std::string server_log = testing::ReadFile(dir_ + "/logs/server.log");
  EXPECT_NE(server_log.find("mutual TLS on"), std::string::npos) << server_log;
  EXPECT_EQ(Count(server_log, "no TLS on"), 0) << server_log;  // loopback, and TLS on
  const std::string shard_log = testing::ReadFile(dir_ + "/logs/server-1.log");
  EXPECT_NE(shard_log.find("joined 127.0.0.1:"), std::string::npos) << shard_log;
}

// Off loopback without TLS: one warning, naming the token and the flags. With
// TLS, or on loopback: none.
TEST_F(TlsDaemons, ServerWarnsOnceWhenListeningOffLoopbackInClearText) {
  setenv("TESTBED_JOB_ID", "tls-test", 1);
  setenv("TESTBED_TOKEN", "secret", 1);
  struct Case {
    std::string listen;
    bool tls;
    int warnings;
  };
  for (const Case& c : {Case{"0.0.0.0:0", false, 1}, Case{"0.0.0.0:0", true, 0},
                        Case{"127.0.0.1:0", false, 0}}) {
    SCOPED_TRACE(c.listen + (c.tls ? " with TLS" : " without TLS"));
    const std::string port_file = dir_ + "/port";
    std::filesystem::remove(port_file);
    std::vector<std::string> args{"--listen", c.listen, "--port-file", port_file};
    if (c.tls) args.insert(args.end(), {"--tls-dir", dir_ + "/certs"});
    // Ended by PID (SIGTERM, then SIGKILL) when it goes out of scope.
    TestbedProcess server(TESTBED_SERVER_PATH, args, dir_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!std::filesystem::exists(port_file) && std::chrono::steady_clock::now() < deadline &&
           !server.Wait(std::chrono::milliseconds(50))) {
    }
    ASSERT_TRUE(std::filesystem::exists(port_file)) << server.Stderr();
    const std::string log = server.Stderr() + server.Stdout();
    EXPECT_EQ(Count(log, "no TLS on"), c.warnings) << log;
    if (c.warnings > 0) {
      EXPECT_NE(log.find("the job token"), std::string::npos) << log;
      EXPECT_NE(log.find("--tls-dir"), std::string::npos) << log;
    }
  }
}

TEST_F(TlsDaemons, ServerNamesAMissingFileAndItsFlag) {
  setenv("TESTBED_JOB_ID", "tls-test", 1);
  setenv("TESTBED_TOKEN", "secret", 1);
  TestbedProcess server(TESTBED_SERVER_PATH,
                        {"--listen", "127.0.0.1:0", "--tls-cert", dir_ + "/certs/cert.pem",
                         "--tls-key", dir_ + "/certs/missing.pem"},
                        dir_);
  const auto status = server.Wait(std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 2);
  const std::string log = server.Stderr() + server.Stdout();
  EXPECT_NE(log.find("--tls-key " + dir_ + "/certs/missing.pem: cannot read: No such file"),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace testbed
