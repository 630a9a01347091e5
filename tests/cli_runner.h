// Runs the `testbed` binary (TESTBED_CLI_PATH, set by CMake) with arguments
// and returns its exit status and everything it printed, for the tests of the
// command line's messages.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>
#include <utility>

namespace testbed::testing {

inline std::pair<int, std::string> RunCli(const std::string& args) {
  const std::string command = std::string(TESTBED_CLI_PATH) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  std::array<char, 4096> buf;
  while (std::size_t n = fread(buf.data(), 1, buf.size(), pipe)) output.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace testbed::testing
