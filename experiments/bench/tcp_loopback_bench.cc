// tcp-loopback-bench: the payload rate one TCP connection between two
// processes reaches over loopback on this machine - the yardstick the
// parameter server's rate through its server is held against.
//
//   tcp-loopback-bench [--bytes 4GiB] [--chunk 1MiB] [--buffer SIZE]
//
// Each side sends from (receives into) successive chunks of its buffer,
// wrapping around at its end. The buffer is the chunk by default, so both
// stay in the CPU's cache; a buffer the size of a tensor (64 MiB) does not,
// and the rate then includes fetching the bytes from memory, as a tensor's
// transfer does.
//
// Prints one JSON object: {"bytes": ..., "seconds": ..., "gbps": ...} (10^9 B/s).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/byte_size.h"

int main(int argc, char** argv) {
  CLI::App app("Payload rate of one TCP connection between two processes over loopback.",
               "tcp-loopback-bench");
  std::string total_text = "4GiB", chunk_text = "1MiB", buffer_text;
  app.add_option("--bytes", total_text, "How much to send")->capture_default_str();
  app.add_option("--chunk", chunk_text, "Bytes per send() and recv() call")
      ->capture_default_str();
  app.add_option("--buffer", buffer_text,
                 "Memory each side walks through, chunk by chunk (default: one chunk, which "
                 "stays in cache; 64MiB leaves it, as a tensor does)");
  CLI11_PARSE(app, argc, argv);
  const auto total = testbed::ParseByteSize(total_text);
  const auto chunk = testbed::ParseByteSize(chunk_text);
  const auto buffer_bytes = buffer_text.empty() ? chunk : testbed::ParseByteSize(buffer_text);
  if (!total.ok() || !chunk.ok() || *chunk <= 0) {
    std::fprintf(stderr, "error: bad --bytes or --chunk\n");
    return 2;
  }
  if (!buffer_bytes.ok() || *buffer_bytes < *chunk) {
    std::fprintf(stderr, "error: bad --buffer: it must hold at least one chunk\n");
    return 2;
  }
  // The next call's place in a buffer walked chunk by chunk, and its length.
  const auto next_span = [&](long long position, long long left) {
    return static_cast<std::size_t>(std::min<long long>({*chunk, *buffer_bytes - position, left}));
  };

  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    std::perror("listen");
    return 1;
  }
  const pid_t child = fork();
  if (child == 0) {  // the receiver
    const int connection = accept(listener, nullptr, nullptr);
    std::vector<char> buffer(*buffer_bytes);  // value-initialized: touched before timing
    long long received = 0, position = 0;
    while (received < *total) {
      const ssize_t n =
          read(connection, buffer.data() + position, next_span(position, *total - received));
      if (n <= 0) _exit(1);
      received += n;
      position = (position + n) % *buffer_bytes;
    }
    const char done = 1;
    (void)!write(connection, &done, 1);
    _exit(0);
  }
  close(listener);
  const int sender = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(sender, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    std::perror("connect");
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    return 1;
  }
  std::vector<char> buffer(*buffer_bytes, 'x');  // touched before timing
  const auto start = std::chrono::steady_clock::now();
  long long sent = 0, position = 0;
  while (sent < *total) {
    const ssize_t n =
        write(sender, buffer.data() + position, next_span(position, *total - sent));
    if (n <= 0) {
      std::perror("write");
      break;
    }
    sent += n;
    position = (position + n) % *buffer_bytes;
  }
  char done = 0;
  (void)!read(sender, &done, 1);  // the receiver has everything
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  close(sender);
  int status = 0;
  waitpid(child, &status, 0);
  std::printf("{\"bytes\": %lld, \"seconds\": %.6f, \"gbps\": %.4f}\n", sent, seconds,
              sent / seconds / 1e9);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
