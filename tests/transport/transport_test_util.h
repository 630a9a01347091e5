// Helpers shared by the transport tests: byte patterns to send and check, a
// scoped environment variable (UCX reads UCX_TLS when a transport is
// created), length-prefixed blobs over pipes (to hand UCX addresses to a
// child process), and a runner that gives every rank its own thread.
//
// Thread-safety: ScopedEnv changes the process environment and must be used
// while no other thread reads it; the rest are plain functions.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace testbed::testing {

using Bytes = std::vector<std::byte>;

// Bytes that depend on their position and on `seed`, so a message that lands
// in the wrong buffer, or shifted, does not compare equal.
inline Bytes Pattern(std::size_t size, std::uint32_t seed) {
  Bytes bytes(size);
  std::uint32_t x = seed * 2654435761u + 12345u;
  for (std::byte& b : bytes) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return bytes;
}

// The index of the first differing byte, or -1 if equal. Tests compare with
// this instead of EXPECT_EQ on the vectors so a failure does not print MiBs.
inline std::int64_t FirstMismatch(std::span<const std::byte> a, std::span<const std::byte> b) {
  if (a.size() != b.size()) return static_cast<std::int64_t>(std::min(a.size(), b.size()));
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<std::int64_t>(i);
  }
  return -1;
}

// Sets (or, with nullopt, unsets) an environment variable for its lifetime.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Writes `blob` to `fd` prefixed with its 64-bit length; false on failure.
inline bool WriteBlob(int fd, std::span<const std::byte> blob) {
  const std::uint64_t length = blob.size();
  auto write_all = [fd](const void* data, std::size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      ssize_t n = ::write(fd, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      p += n;
      size -= static_cast<std::size_t>(n);
    }
    return true;
  };
  return write_all(&length, sizeof(length)) && write_all(blob.data(), blob.size());
}

// Reads one WriteBlob() from `fd`; nullopt on EOF, error, or if `timeout`
// passes first (so a test whose child died early fails instead of hanging).
inline std::optional<Bytes> ReadBlob(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto read_all = [&](void* data, std::size_t size) {
    char* p = static_cast<char*>(data);
    while (size > 0) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd pfd{.fd = fd, .events = POLLIN, .revents = 0};
      int ready = ::poll(&pfd, 1, static_cast<int>(left.count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return false;
      ssize_t n = ::read(fd, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      p += n;
      size -= static_cast<std::size_t>(n);
    }
    return true;
  };
  std::uint64_t length = 0;
  if (!read_all(&length, sizeof(length)) || length > (std::uint64_t{1} << 20)) return std::nullopt;
  Bytes blob(length);
  if (!read_all(blob.data(), blob.size())) return std::nullopt;
  return blob;
}

// Runs body(rank) on one thread per rank and joins them all.
inline void RunOnThreads(int world_size, const std::function<void(int rank)>& body) {
  std::vector<std::thread> threads;
  threads.reserve(world_size);
  for (int rank = 0; rank < world_size; ++rank) threads.emplace_back(body, rank);
  for (std::thread& thread : threads) thread.join();
}

}  // namespace testbed::testing
