// The one process runner of the tests. RunCommand, RunProgram, RunCli and
// ShellOutput run a command to its end and return what it printed, for the
// tests of command lines' messages; TestbedProcess starts `testbed` (or any
// binary) as a child the test watches while it runs. Both always end what
// they started: RunCommand kills its command's whole process group past its
// timeout, TestbedProcess's destructor ends its child (and with
// PR_SET_PDEATHSIG on the child's side, its daemons follow) if the test did
// not wait for it.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace testbed::testing {

// How long RunProgram, RunCli and ShellOutput let a command run: longer than
// any one command a test runs, shorter than CTest's timeouts, so a hung
// program fails its own test with what it printed instead of the suite's
// timeout with nothing, and leaves no process behind.
inline constexpr std::chrono::minutes kRunTimeout{10};

// Runs `/bin/sh -c command` in a process group of its own and returns its
// exit status and what it wrote to stdout (add 2>&1 for stderr). Past
// `timeout` it kills the whole group - the shell and whatever it started -
// and returns -1 with what had arrived. A status of -1 also means the
// command died of a signal or could not start.
inline std::pair<int, std::string> RunCommand(const std::string& command,
                                              std::chrono::milliseconds timeout) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return {-1, "process_runner: pipe failed"};
  const pid_t pid = fork();
  if (pid < 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return {-1, "process_runner: fork failed"};
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(pipe_fds[1], STDOUT_FILENO);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);  // also here: the group exists before either side goes on
  close(pipe_fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string output;
  bool timed_out = false;
  for (char buffer[4096];;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd readable{pipe_fds[0], POLLIN, 0};
    const int ready = left.count() > 0 ? poll(&readable, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      timed_out = true;
      break;
    }
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // end of output: every writer closed the pipe
    output.append(buffer, static_cast<std::size_t>(n));
  }
  close(pipe_fds[0]);
  if (timed_out) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return {-1, output + "\nprocess_runner: killed after " +
                                 std::to_string(timeout.count()) + " ms: " + command};
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// A program's exit status and everything it printed, stdout and stderr
// together; `args` is shell text (quotes and redirections work).
inline std::pair<int, std::string> RunProgram(const std::string& path, const std::string& args) {
  return RunCommand(path + " " + args + " 2>&1", kRunTimeout);
}

#ifdef TESTBED_CLI_PATH
// The `testbed` binary (TESTBED_CLI_PATH, set by CMake for RUNS_CLI suites).
inline std::pair<int, std::string> RunCli(const std::string& args) {
  return RunProgram(TESTBED_CLI_PATH, args);
}
#endif

// What a shell command prints on stdout ("" if it cannot start): for the
// tests that read `ip` and `tc`.
inline std::string ShellOutput(const std::string& command) {
  return RunCommand(command, kRunTimeout).second;
}

// A TCP port nothing listens on now (the kernel's choice for port 0).
inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

// A fresh folder for one test's files, under the system's temp folder.
inline std::string TempDir(const std::string& name) {
  std::string path = (std::filesystem::temp_directory_path() / ("testbed-it-" + name + "-XXXXXX")).string();
  return mkdtemp(path.data());
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The file at `path` once it holds `text` and the rest of that line (a reader
// can catch a line half written), or as it is after `timeout`.
inline std::string WaitForLine(const std::string& path, const std::string& text,
                               std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto holds_whole_line = [&](const std::string& content) {
    const std::size_t at = content.find(text);
    return at != std::string::npos && content.find('\n', at) != std::string::npos;
  };
  std::string content = ReadFile(path);
  while (!holds_whole_line(content) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    content = ReadFile(path);
  }
  return content;
}

class TestbedProcess {
 public:
  // Starts `binary args...` with stdout and stderr going to files in `dir`.
  TestbedProcess(const std::string& binary, const std::vector<std::string>& args,
                 const std::string& dir)
      : out_(dir + "/stdout"), err_(dir + "/stderr") {
    pid_ = fork();
    if (pid_ == 0) {
      const int out = open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(out, STDOUT_FILENO);
      dup2(err, STDERR_FILENO);
      std::vector<char*> argv{const_cast<char*>(binary.c_str())};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }

  ~TestbedProcess() {
    if (pid_ > 0 && !status_) {
      kill(pid_, SIGTERM);  // the harness ends its daemons on SIGTERM
      if (!Wait(std::chrono::seconds(15))) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
      }
    }
  }

  pid_t pid() const { return pid_; }

  // The exit status, or nullopt if still running after `timeout`.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!status_) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return status_;
  }

  std::string Stdout() const { return ReadFile(out_); }
  std::string Stderr() const { return ReadFile(err_); }

  // Stderr (stdout: the daemons' logs) once it holds `text` and the rest of
  // that line (a reader can catch a line half written), or as it is after
  // `timeout`.
  std::string WaitForStderr(const std::string& text, std::chrono::milliseconds timeout) const {
    return WaitForLine(err_, text, timeout);
  }
  std::string WaitForStdout(const std::string& text, std::chrono::milliseconds timeout) const {
    return WaitForLine(out_, text, timeout);
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string out_, err_;
};

// The value of "key": ... in one JSON line (numbers and strings; no nesting),
// or "" when there is none. A value counts only when it ends where JSON says
// a value ends (",", "}" or "]"): a line cut short ("wrong": 1 of a lost
// "wrong": 10) or a number run into junk ("wrong": 0x) is no value. Strings
// come back as written between their quotes (escapes kept), so an escaped
// quote does not end them.
inline std::string JsonField(const std::string& line, const std::string& key) {
  std::string quoted_key;
  for (char c : key) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) quoted_key += '\\';
    quoted_key += c;
  }
  const std::regex pattern("\"" + quoted_key +
                           "\": (\"((?:[^\"\\\\]|\\\\.)*)\"|-?[0-9][0-9.eE+-]*)(?=\\s*[,}\\]])");
  std::smatch match;
  if (!std::regex_search(line, match, pattern)) return "";
  return match[2].matched ? match[2].str() : match[1].str();
}

// The numbers of an array field of one JSON line ("key": [1, 2.5]), in order;
// none when the key is missing or holds no array.
inline std::vector<double> JsonNumbers(const std::string& line, const std::string& key) {
  std::smatch match;
  std::vector<double> values;
  if (!std::regex_search(line, match, std::regex("\"" + key + "\": \\[([^\\]]*)\\]"))) {
    return values;
  }
  std::stringstream list(match[1].str());
  for (std::string item; std::getline(list, item, ',');) values.push_back(std::atof(item.c_str()));
  return values;
}

// The PIDs `testbed local` printed for its daemons: "testbed-server pids A B
// (coordinator on ...); testbed-worker pids X Y Z; logs in ...".
struct DaemonPids {
  std::vector<pid_t> servers, workers;
  std::vector<pid_t> all() const {
    std::vector<pid_t> pids = servers;
    pids.insert(pids.end(), workers.begin(), workers.end());
    return pids;
  }
};

inline std::vector<pid_t> ParsePids(const std::string& list) {
  std::vector<pid_t> pids;
  std::stringstream in(list);
  for (long pid; in >> pid;) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

inline std::optional<DaemonPids> ParseDaemonPids(const std::string& err) {
  std::smatch match;
  if (!std::regex_search(err, match,
                         std::regex("testbed-server pids ([0-9 ]+) \\(coordinator[^;]*; "
                                    "testbed-worker pids ([0-9 ]+);"))) {
    return std::nullopt;
  }
  DaemonPids pids{ParsePids(match[1].str()), ParsePids(match[2].str())};
  if (pids.servers.empty() || pids.workers.empty()) return std::nullopt;
  return pids;
}

// Whether `pid` still runs: kill(pid, 0) succeeds and it is not a zombie
// waiting for a parent that does not reap (PID 1 of a container may not).
inline bool Alive(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

// The PIDs of `pids` still alive after `timeout`.
inline std::vector<pid_t> Survivors(const std::vector<pid_t>& pids,
                                    std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<pid_t> alive;
  do {
    alive.clear();
    for (pid_t pid : pids) {
      if (Alive(pid)) alive.push_back(pid);
    }
    if (alive.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (std::chrono::steady_clock::now() < deadline);
  return alive;
}

// Kills, by PID, every daemon handed to it that still runs when it goes out
// of scope - whether the test passed or failed. Declare it before the
// TestbedProcess, so that the harness gets its SIGTERM first and this only
// ends what the harness left behind.
class DaemonReaper {
 public:
  DaemonReaper() = default;
  DaemonReaper(const DaemonReaper&) = delete;
  DaemonReaper& operator=(const DaemonReaper&) = delete;
  ~DaemonReaper() {
    for (pid_t pid : pids_) {
      if (Alive(pid)) kill(pid, SIGKILL);  // a stopped one too
    }
  }
  void Add(const std::vector<pid_t>& pids) { pids_.insert(pids_.end(), pids.begin(), pids.end()); }

 private:
  std::vector<pid_t> pids_;
};

// How `testbed local` reported that daemon `who` ("testbed-worker 2") with
// `pid` ended - "exited with status 1", "was killed by signal 9" - or "" when
// it printed no such line. After a failed experiment it waits for the
// workers to exit on their own and reports each exit it saw; only the daemons
// it had to stop itself (a hung one) have no line.
inline std::string ExitReport(const std::string& report, const std::string& who, pid_t pid) {
  const std::string head = "testbed local: " + who + " (pid " + std::to_string(pid) + ") ";
  const std::size_t at = report.find(head);
  if (at == std::string::npos) return "";
  const std::size_t begin = at + head.size();
  return report.substr(begin, report.find('\n', begin) - begin);
}

// What a daemon's own log says of itself: the first capture of `pattern`
// in `path`, once there (waiting up to `timeout`), or nothing.
inline std::optional<int> LoggedNumber(const std::string& path, const std::string& pattern,
                                       std::chrono::milliseconds timeout = {}) {
  const std::regex re(pattern);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const std::string log = ReadFile(path);
    std::smatch match;
    if (std::regex_search(log, match, re)) return std::stoi(match[1].str());
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// The folder `testbed local` said its daemons log to ("...; logs in DIR"), or "".
inline std::string LogDir(const std::string& err) {
  std::smatch match;
  if (!std::regex_search(err, match, std::regex("; logs in ([^\n]+)"))) return "";
  return match[1].str();
}

// Whether every worker of a `testbed local` run logging to `log_dir` said,
// within `timeout`, that its sweep has started ("experiment N: sweep
// started", worker/control_handlers.cc): the moment a test means by "mid-sweep",
// instead of a guess of seconds.
inline bool WaitForSweeps(const std::string& log_dir, int workers,
                          std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int i = 0; i < workers; ++i) {
    const std::string log = (std::filesystem::path(log_dir) / ("worker-" + std::to_string(i) + ".log")).string();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (WaitForLine(log, "sweep started", std::max(left, std::chrono::milliseconds(0)))
            .find("sweep started") == std::string::npos) {
      return false;
    }
  }
  return true;
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

}  // namespace testbed::testing
