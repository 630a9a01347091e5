// Runs `testbed` as a child process for the integration tests and always
// ends it: the destructor kills it (and with PR_SET_PDEATHSIG on its side,
// its daemons follow) if the test did not wait for it.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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
#include <vector>

namespace testbed::testing {

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
