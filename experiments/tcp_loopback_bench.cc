// tcp-loopback-bench: the payload rate one TCP connection between two
// processes reaches over loopback on this machine - the yardstick the
// parameter server's rate through its server is held against.
//
//   tcp-loopback-bench [--bytes 4GiB] [--chunk 1MiB]
//
// Prints one JSON object: {"bytes": ..., "seconds": ..., "gbps": ...} (10^9 B/s).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include <CLI/CLI.hpp>

#include "experiments/byte_size.h"

int main(int argc, char** argv) {
  CLI::App app("Payload rate of one TCP connection between two processes over loopback.",
               "tcp-loopback-bench");
  std::string total_text = "4GiB", chunk_text = "1MiB";
  app.add_option("--bytes", total_text, "How much to send")->capture_default_str();
  app.add_option("--chunk", chunk_text, "Bytes per send() call")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const auto total = testbed::ParseByteSize(total_text);
  const auto chunk = testbed::ParseByteSize(chunk_text);
  if (!total.ok() || !chunk.ok() || *chunk <= 0) {
    std::fprintf(stderr, "error: bad --bytes or --chunk\n");
    return 2;
  }

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
    std::vector<char> buffer(*chunk);
    long long received = 0;
    while (received < *total) {
      const ssize_t n = read(connection, buffer.data(), buffer.size());
      if (n <= 0) _exit(1);
      received += n;
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
  std::vector<char> buffer(*chunk, 'x');  // touched before timing
  const auto start = std::chrono::steady_clock::now();
  long long sent = 0;
  while (sent < *total) {
    const ssize_t n = write(sender, buffer.data(), std::min<long long>(buffer.size(), *total - sent));
    if (n <= 0) {
      std::perror("write");
      break;
    }
    sent += n;
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
