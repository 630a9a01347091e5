// `testbed lab` as a process: docker/lab.yml asks the binaries only for flags
// they have, the lab refuses a deployment it cannot build with a message, and
// with --coordinator its runs go to daemons already running - what the
// compose file's lab service does, here with daemons started on loopback.
// Every process a test starts it ends by PID (TestbedProcess), also on failure.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "tests/process_runner.h"
#include "tests/lab_http.h"

namespace testbed {
namespace {

using testing::RunProgram;
using testing::TestbedProcess;

using testing::ReadFile;

std::string ReadAll(const std::string& path) { return ReadFile(path); }

// Every `command:` of a compose file, as words: the JSON-array form on one
// line, and the folded (>-) form on the indented lines that follow it.
std::vector<std::vector<std::string>> ComposeCommands(const std::string& yaml) {
  std::vector<std::vector<std::string>> commands;
  std::vector<std::string> lines = absl::StrSplit(yaml, '\n');
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::size_t at = lines[i].find("command:");
    if (at == std::string::npos || lines[i].find('#') < at) continue;
    std::string text = lines[i].substr(at + 8);
    if (text.find(">-") != std::string::npos) {
      text.clear();
      const std::size_t indent = lines[i].find_first_not_of(' ');
      while (i + 1 < lines.size() && lines[i + 1].find_first_not_of(' ') > indent &&
             lines[i + 1].find_first_not_of(' ') != std::string::npos) {
        text += " " + lines[++i];
      }
    }
    for (char& c : text) {
      if (c == '[' || c == ']' || c == ',' || c == '"') c = ' ';
    }
    commands.push_back(absl::StrSplit(text, ' ', absl::SkipEmpty()));
  }
  return commands;
}

std::string HelpOf(const std::vector<std::string>& command) {
  std::string program = command[0];
  std::string args = "--help";
  if (program == "testbed") {
    program = TESTBED_CLI_PATH;
    args = command[1] + " --help";  // the subcommand's own help
  } else if (program == "testbed-server") {
    program = TESTBED_SERVER_PATH;
  } else if (program == "testbed-worker") {
    program = TESTBED_WORKER_PATH;
  } else {
    ADD_FAILURE() << "docker/lab.yml runs " << program << ", which the image does not have";
  }
  return RunProgram(program, args).second;
}

TEST(LabCompose, EveryCommandUsesFlagsItsProgramHas) {
  const std::vector<std::vector<std::string>> commands =
      ComposeCommands(ReadAll(std::string(TESTBED_SOURCE_DIR) + "/docker/lab.yml"));
  ASSERT_EQ(commands.size(), 3u) << "server, worker and lab";
  bool has_lab = false;
  for (const std::vector<std::string>& command : commands) {
    ASSERT_FALSE(command.empty());
    const std::string help = HelpOf(command);
    for (const std::string& word : command) {
      if (word.rfind("--", 0) != 0) continue;
      EXPECT_NE(help.find(word), std::string::npos) << command[0] << " has no " << word;
    }
    has_lab = has_lab || (command.size() > 1 && command[0] == "testbed" && command[1] == "lab");
  }
  EXPECT_TRUE(has_lab);
}

// The page's largest N and the workers started are the same setting.
TEST(LabCompose, TheLabAsksForAtMostTheWorkersStarted) {
  const std::string yaml = ReadAll(std::string(TESTBED_SOURCE_DIR) + "/docker/lab.yml");
  EXPECT_NE(yaml.find("replicas: ${TESTBED_WORKERS:-4}"), std::string::npos);
  EXPECT_NE(yaml.find("--workers ${TESTBED_WORKERS:-4}"), std::string::npos);
}

TEST(LabCommand, RefusesWhatItCannotDeploy) {
  auto [code, out] = testing::RunCli("lab --link-rate 1gbit --listen 127.0.0.1:0");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--link-rate needs --network netns"), std::string::npos) << out;

  std::tie(code, out) =
      testing::RunCli("lab --network netns --coordinator 127.0.0.1:1 --listen 127.0.0.1:0");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("choose one"), std::string::npos) << out;

  std::tie(code, out) = testing::RunCli("lab --network mesh");
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("--network"), std::string::npos) << out;

  std::tie(code, out) = RunProgram("env -u TESTBED_TOKEN -u TESTBED_JOB_ID " +
                                       std::string(TESTBED_CLI_PATH),
                                   "lab --coordinator 127.0.0.1:1 --listen 127.0.0.1:0");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("TESTBED_JOB_ID and TESTBED_TOKEN"), std::string::npos) << out;
}

// Without root (or without iproute2) the emulated cluster is refused at
// start, naming what it needs - not on the first run from the page.
TEST(LabCommand, RefusesNetnsWithoutRootOrIproute) {
  // As root the check for `ip` and `tc` is what is left: an empty PATH hides them.
  const std::string env = geteuid() == 0 ? "env PATH=/nonexistent " : "";
  const auto [code, out] = RunProgram(env + TESTBED_CLI_PATH,
                                      "lab --network netns --listen 127.0.0.1:0");
  EXPECT_EQ(code, 2);
  EXPECT_TRUE(out.find("needs root") != std::string::npos ||
              out.find("needs iproute2") != std::string::npos)
      << out;
}

// The lab's page address, from its first line on stdout.
int LabPort(const std::string& stdout_path) {
  const std::regex open_line(R"(open http://[^:]+:(\d+)/)");
  for (int tries = 0; tries < 200; ++tries) {
    std::smatch match;
    const std::string text = ReadAll(stdout_path);
    if (std::regex_search(text, match, open_line)) return std::stoi(match[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

TEST(LabCommand, RunsOnDaemonsAlreadyRunning) {
  setenv("TESTBED_JOB_ID", "lab-compose", 1);
  setenv("TESTBED_TOKEN", "classroom", 1);
  setenv("UCX_NET_DEVICES", "lo", 1);
  const std::string dir = testing::TempDir("lab_cli_test");
  const std::string coordinator = "127.0.0.1:" + std::to_string(testing::FreePort());
  std::filesystem::create_directories(dir + "/server");
  TestbedProcess server(TESTBED_SERVER_PATH, {"--listen", coordinator}, dir + "/server");
  std::vector<std::unique_ptr<TestbedProcess>> workers;
  for (int w = 0; w < 2; ++w) {
    const std::string own = dir + "/worker" + std::to_string(w);
    std::filesystem::create_directories(own);
    workers.push_back(std::make_unique<TestbedProcess>(
        TESTBED_WORKER_PATH,
        std::vector<std::string>{"--coordinator", coordinator, "--connect-timeout", "60"}, own));
  }
  std::filesystem::create_directories(dir + "/lab");
  TestbedProcess lab(TESTBED_CLI_PATH,
                     {"lab", "--listen", "127.0.0.1:0", "--coordinator", coordinator,
                      "--workers", "2"},
                     dir + "/lab");
  const int port = LabPort(dir + "/lab/stdout");
  ASSERT_GT(port, 0) << ReadAll(dir + "/lab/stderr");
  EXPECT_NE(ReadAll(dir + "/lab/stderr").find("runs go to the daemons of " + coordinator),
            std::string::npos);

  httplib::Client client("127.0.0.1", port);
  httplib::Result posted =
      client.Post("/api/run?collective=ring&n=2&bytes=4KiB&iters=2", "", "text/plain");
  ASSERT_TRUE(posted);
  ASSERT_EQ(posted->status, 202) << posted->body;
  const std::string run = testing::WaitForLabRun(client);
  EXPECT_NE(run.find("\"state\":\"done\""), std::string::npos) << run;
  EXPECT_TRUE(std::regex_search(run, std::regex(R"("wrong": ?0\b)"))) << run;
  // The Memory part's measured traffic: ZeRO stage 3 moves 1.5 times DDP's bytes, exactly.
  posted = client.Post("/api/zero-traffic?n=2&bytes=64KiB&iters=2", "", "text/plain");
  ASSERT_TRUE(posted);
  ASSERT_EQ(posted->status, 202) << posted->body;
  const std::string zero = testing::WaitForLabRun(client, "/api/zero-traffic?id=2");
  EXPECT_NE(zero.find("\"state\":\"done\""), std::string::npos) << zero;
  // RS + 2 AG = 3(N-1)M = 196608 bytes for N = 2, M = 64 KiB.
  const std::string stage3 =
      R"("stage":3,"collectives":"reduce-scatter + 2 all-gathers","bytes":196608,)";
  EXPECT_NE(zero.find(stage3), std::string::npos) << zero;
  EXPECT_NE(zero.find(R"("bytes_vs_ddp":1.5,)"), std::string::npos) << zero;
  // The lab started no daemon of its own: the runs went to the test's.
  const std::string server_log = ReadAll(dir + "/server/stdout") + ReadAll(dir + "/server/stderr");
  EXPECT_NE(server_log.find("2 workers"), std::string::npos) << server_log;
}

}  // namespace
}  // namespace testbed
