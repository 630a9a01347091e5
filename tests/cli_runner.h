// Runs a program with arguments and returns its exit status and everything it
// printed, for the tests of command lines' messages: RunCli for the `testbed`
// binary (TESTBED_CLI_PATH, set by CMake for RUNS_CLI suites), RunProgram for
// any other, ShellOutput for a shell command's stdout.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>
#include <utility>

namespace testbed::testing {

inline std::pair<int, std::string> RunProgram(const std::string& path, const std::string& args) {
  const std::string command = path + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  std::array<char, 4096> buf;
  while (std::size_t n = fread(buf.data(), 1, buf.size(), pipe)) output.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// What a shell command prints on stdout ("" if it cannot start): for the
// tests that read `ip` and `tc`.
inline std::string ShellOutput(const std::string& command) {
  std::string text;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    std::array<char, 4096> buf;
    while (std::size_t n = fread(buf.data(), 1, buf.size(), pipe)) text.append(buf.data(), n);
    pclose(pipe);
  }
  return text;
}

#ifdef TESTBED_CLI_PATH
inline std::pair<int, std::string> RunCli(const std::string& args) {
  return RunProgram(TESTBED_CLI_PATH, args);
}
#endif

}  // namespace testbed::testing
