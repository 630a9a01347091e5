// A UCX peer in a process of its own, for the tests in ucx_transport_test.cc
// that need a peer process to die. It is rank 1 of 2 and talks to its parent
// (rank 0) over stdin/stdout:
//   1. writes its worker address (length-prefixed) to stdout;
//   2. reads rank 0's address from stdin and connects;
//   3. answers one ping (8 bytes, tag 1, echoed back with tag 2), so every
//      connection is up before it goes away;
//   4. then, by argv[1]: "exit" ends the process at once with _exit(0), with
//      no orderly close, as a crash would; "wait" blocks until stdin closes
//      (or the parent kills it) and then shuts down cleanly.
// An optional argv[2] "no-peer-errors" turns UCX's peer error handling off
// (the parent must do the same). UCX_TLS comes from the environment.
//
// Exit status: 0 on success, 2 for bad usage, 3 if a step failed.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "allreduce/transport/ucx_transport.h"
#include "tests/transport/transport_test_util.h"

namespace testbed {
namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "ucx_transport_peer: %s\n", what.c_str());
  return 3;
}

int Run(const std::string& mode, bool peer_error_handling) {
  absl::StatusOr<std::unique_ptr<UcxTransport>> transport =
      UcxTransport::Create(1, 2,
                           UcxOptions{.wait_timeout = std::chrono::seconds(30),
                                      .peer_error_handling = peer_error_handling});
  if (!transport.ok()) return Fail(std::string(transport.status().message()));
  if (!testing::WriteBlob(STDOUT_FILENO, (*transport)->WorkerAddress())) {
    return Fail("cannot write the address");
  }
  std::optional<testing::Bytes> parent = testing::ReadBlob(STDIN_FILENO, std::chrono::seconds(30));
  if (!parent) return Fail("no address from the parent");
  absl::Status status = (*transport)->Connect({*parent, {}});
  if (!status.ok()) return Fail(std::string(status.message()));

  testing::Bytes ping(8);
  status = (*transport)->PostRecv(0, 1, ping);
  if (status.ok()) status = (*transport)->WaitAll();
  if (status.ok()) status = (*transport)->PostSend(0, 2, ping);
  if (status.ok()) status = (*transport)->WaitAll();
  if (!status.ok()) return Fail(std::string(status.message()));

  if (mode == "exit") _exit(0);  // no destructors: nothing is closed in order
  char byte;
  while (read(STDIN_FILENO, &byte, 1) > 0) {
  }
  return 0;
}

}  // namespace
}  // namespace testbed

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const std::string option = argc > 2 ? argv[2] : "";
  if (argc < 2 || argc > 3 || (mode != "exit" && mode != "wait") ||
      (argc == 3 && option != "no-peer-errors")) {
    std::fprintf(stderr, "usage: %s exit|wait [no-peer-errors]\n", argv[0]);
    return 2;
  }
  return testbed::Run(mode, option != "no-peer-errors");
}
