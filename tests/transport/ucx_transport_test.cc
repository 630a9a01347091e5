// UCX-only behaviour of UcxTransport, beyond the conformance suite:
// argument checks, which transports UCX picked, that waiting sleeps instead
// of spinning, and the real test of peer error handling: a peer *process*
// (ucx_transport_peer) that dies while this one waits on it.
#include "allreduce/transport/ucx_transport.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "tests/transport/transport_test_util.h"

extern char** environ;

namespace testbed {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Bytes;
using ::testing::HasSubstr;
using testing::ReadBlob;
using testing::ScopedEnv;
using testing::WriteBlob;

std::unique_ptr<UcxTransport> MustCreate(int rank, int world_size, UcxOptions options = {}) {
  absl::StatusOr<std::unique_ptr<UcxTransport>> transport =
      UcxTransport::Create(rank, world_size, options);
  EXPECT_TRUE(transport.ok()) << transport.status();
  return transport.ok() ? *std::move(transport) : nullptr;
}

TEST(UcxTransportTest, CreateRejectsBadRankAndWorldSize) {
  EXPECT_EQ(UcxTransport::Create(2, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UcxTransport::Create(-1, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UcxTransport::Create(0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UcxTransport::Create(0, 70000).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(UcxTransportTest, PostingNeedsConnectAndConnectNeedsEveryAddress) {
  std::unique_ptr<UcxTransport> transport = MustCreate(0, 2);
  ASSERT_NE(transport, nullptr);
  EXPECT_FALSE(transport->WorkerAddress().empty());
  Bytes buffer(4);
  EXPECT_EQ(transport->PostSend(1, 0, buffer).code(), absl::StatusCode::kFailedPrecondition);

  std::unique_ptr<UcxTransport> other = MustCreate(0, 2);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->Connect({other->WorkerAddress()}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(other->Connect({other->WorkerAddress(), {}}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(UcxTransportTest, TagAboveFortyEightBitsIsInvalid) {
  std::unique_ptr<UcxTransport> a = MustCreate(0, 2);
  std::unique_ptr<UcxTransport> b = MustCreate(1, 2);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  ASSERT_TRUE(a->Connect({a->WorkerAddress(), b->WorkerAddress()}).ok());
  Bytes buffer(4);
  EXPECT_EQ(a->PostSend(1, kMaxTag + 1, buffer).code(), absl::StatusCode::kInvalidArgument);
}

TEST(UcxTransportTest, DescribeEndpointShowsTheTransportInUse) {
  ScopedEnv tls("UCX_TLS", "tcp");
  std::unique_ptr<UcxTransport> a = MustCreate(0, 2);
  std::unique_ptr<UcxTransport> b = MustCreate(1, 2);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  const std::vector<std::vector<std::byte>> addresses = {a->WorkerAddress(), b->WorkerAddress()};
  ASSERT_TRUE(a->Connect(addresses).ok());
  ASSERT_TRUE(b->Connect(addresses).ok());
  EXPECT_THAT(a->DescribeEndpoint(1), HasSubstr("tcp"));
  EXPECT_EQ(a->DescribeEndpoint(0), "");  // no endpoint to itself
}

double ThreadCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

struct IdleWaitCase {
  std::string name;
  std::string tls;           // UCX_TLS
  bool peer_error_handling;  // off for shared memory, which needs it off
  bool peer_talked_first;    // vs. a peer that never progressed its worker
};

void PrintTo(const IdleWaitCase& param, std::ostream* os) { *os << param.name; }

class UcxIdleWaitTest : public ::testing::TestWithParam<IdleWaitCase> {};

// An idle wait sleeps instead of spinning: over a second of waiting for a
// message that never comes, the waiting thread uses a small fraction of a
// core. Run with the peer already talked to (the worker's event fd works as
// documented) and with a peer that never progressed its worker (UCX's TCP
// then keeps the event fd readable, see Worker::ProgressUntil).
TEST_P(UcxIdleWaitTest, IdleWaitSleepsInsteadOfSpinning) {
  const IdleWaitCase& param = GetParam();
  std::optional<ScopedEnv> tls(std::in_place, "UCX_TLS", param.tls);
  std::unique_ptr<UcxTransport> a = MustCreate(
      0, 2, {.wait_timeout = seconds(1), .peer_error_handling = param.peer_error_handling});
  std::unique_ptr<UcxTransport> b =
      MustCreate(1, 2, {.peer_error_handling = param.peer_error_handling});
  tls.reset();
  ASSERT_TRUE(a != nullptr && b != nullptr);
  const std::vector<std::vector<std::byte>> addresses = {a->WorkerAddress(), b->WorkerAddress()};
  ASSERT_TRUE(a->Connect(addresses).ok());
  ASSERT_TRUE(b->Connect(addresses).ok());
  if (param.peer_talked_first) {
    Bytes ping(4), pong(4);
    std::thread peer([&] {
      Bytes echo(4);
      EXPECT_TRUE(b->PostRecv(0, 7, echo).ok());
      EXPECT_TRUE(b->WaitAll().ok());
      EXPECT_TRUE(b->PostSend(0, 8, echo).ok());
      EXPECT_TRUE(b->WaitAll().ok());
    });
    EXPECT_TRUE(a->PostSend(1, 7, ping).ok());
    EXPECT_TRUE(a->PostRecv(1, 8, pong).ok());
    EXPECT_TRUE(a->WaitAll().ok());
    peer.join();
  }
  Bytes never(4);
  ASSERT_TRUE(a->PostRecv(1, 0, never).ok());
  const double start = ThreadCpuSeconds();
  EXPECT_EQ(a->WaitAll().code(), absl::StatusCode::kDeadlineExceeded);
  const double used = ThreadCpuSeconds() - start;
  EXPECT_LT(used, 0.25) << "WaitAll burned " << used << " s of CPU in 1 s";
  // `a` first: `b` would otherwise flush towards a peer that no longer
  // progresses, and wait out its close timeout.
  a.reset();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, UcxIdleWaitTest,
    ::testing::Values(IdleWaitCase{"tcp_talked_first", "tcp", true, true},
                      IdleWaitCase{"tcp_never_progressed", "tcp", true, false},
                      IdleWaitCase{"shm_talked_first", "sm", false, true},
                      IdleWaitCase{"shm_never_progressed", "sm", false, false}),
    [](const ::testing::TestParamInfo<IdleWaitCase>& info) { return info.param.name; });

// A rank that is done serves its peers until released, as a worker daemon
// does between its Finished and the coordinator's verdict: the peer's late
// receives of what it sent complete, the serving thread sleeps rather than
// spins, and it returns soon after its release. (That a peer *needs* the
// serving - a last eager fragment still in UCX's buffer - is not something
// loopback shows on demand; the integration suites show that serving, unlike
// a flush, never waits on peers that are done.)
TEST(UcxTransportTest, ServingPeersSleepsDeliversAndEndsOnRelease) {
  std::optional<ScopedEnv> tls(std::in_place, "UCX_TLS", "tcp");
  std::unique_ptr<UcxTransport> a = MustCreate(0, 2);
  std::unique_ptr<UcxTransport> b = MustCreate(1, 2);
  tls.reset();
  ASSERT_TRUE(a != nullptr && b != nullptr);
  const std::vector<std::vector<std::byte>> addresses = {a->WorkerAddress(), b->WorkerAddress()};
  ASSERT_TRUE(a->Connect(addresses).ok());
  ASSERT_TRUE(b->Connect(addresses).ok());
  {  // Connections complete only while both workers progress.
    Bytes ping(4), pong(4);
    std::thread peer([&] {
      EXPECT_TRUE(b->PostRecv(0, 0, pong).ok());
      EXPECT_TRUE(b->WaitAll().ok());
    });
    EXPECT_TRUE(a->PostSend(1, 0, ping).ok());
    EXPECT_TRUE(a->WaitAll().ok());
    peer.join();
  }
  // Eager messages, which complete at the sender while the peer is idle.
  const std::vector<std::size_t> sizes = {8, 4097};
  std::vector<Bytes> sent;
  for (std::size_t m = 0; m < sizes.size(); ++m) {
    sent.push_back(testing::Pattern(sizes[m], static_cast<std::uint32_t>(m)));
    ASSERT_TRUE(a->PostSend(1, m + 1, sent.back()).ok());
  }
  ASSERT_TRUE(a->WaitAll().ok());

  std::atomic<bool> released{false};
  double serving_cpu = 0;
  std::thread serving([&] {
    const double start = ThreadCpuSeconds();
    a->ServePeersUntil(released);
    serving_cpu = ThreadCpuSeconds() - start;
  });
  std::this_thread::sleep_for(milliseconds(300));  // the peer is late
  std::vector<Bytes> received;
  for (std::size_t m = 0; m < sizes.size(); ++m) received.emplace_back(sizes[m]);
  for (std::size_t m = 0; m < sizes.size(); ++m) {
    ASSERT_TRUE(b->PostRecv(0, m + 1, received[m]).ok());
  }
  const absl::Status waited = b->WaitAll();
  EXPECT_TRUE(waited.ok()) << waited;
  for (std::size_t m = 0; m < sizes.size(); ++m) {
    EXPECT_EQ(testing::FirstMismatch(received[m], sent[m]), -1) << "message " << m;
  }
  std::this_thread::sleep_for(milliseconds(700));  // nothing left to serve
  const auto released_at = std::chrono::steady_clock::now();
  released = true;
  serving.join();
  EXPECT_LT(std::chrono::steady_clock::now() - released_at, seconds(5))
      << "served on long after its release";
  EXPECT_LT(serving_cpu, 0.25) << "serving burned " << serving_cpu << " s of CPU in 1 s";
  // Both at once: each flushes towards the other on its way out.
  std::thread close_b([&] { b.reset(); });
  a.reset();
  close_b.join();
}

// Every stage of the wait delivers: exchanges between two ranks complete, with
// the right bytes, whether a wait yields the core between polls (the
// default), sleeps at once (no yielding stage), or has its yields paused
// after the first one (every yield counted as slow). Timing is not checked.
TEST(UcxTransportTest, ExchangesCompleteWhateverTheWaitStages) {
  struct Stages {
    std::string name;
    UcxOptions options;
  };
  const std::vector<Stages> cases = {
      {"default", {}},
      {"sleep_at_once", {.yield_spin = std::chrono::microseconds(0)}},
      {"yields_paused",
       {.slow_yield = std::chrono::microseconds(0), .yield_pause = seconds(60)}},
  };
  for (const Stages& stages : cases) {
    SCOPED_TRACE(stages.name);
    std::optional<ScopedEnv> tls(std::in_place, "UCX_TLS", "tcp");
    std::unique_ptr<UcxTransport> a = MustCreate(0, 2, stages.options);
    std::unique_ptr<UcxTransport> b = MustCreate(1, 2, stages.options);
    tls.reset();  // before any other thread runs
    ASSERT_TRUE(a != nullptr && b != nullptr);
    const std::vector<std::vector<std::byte>> addresses = {a->WorkerAddress(),
                                                           b->WorkerAddress()};
    ASSERT_TRUE(a->Connect(addresses).ok());
    ASSERT_TRUE(b->Connect(addresses).ok());
    constexpr int kExchanges = 50;
    // Each rank sends its rank and the exchange's index, and checks what
    // the other sent.
    const auto run = [&](UcxTransport& self) {
      const int peer = 1 - self.rank();
      for (int i = 0; i < kExchanges; ++i) {
        const std::int32_t mine[2] = {self.rank(), i};
        std::int32_t theirs[2] = {-1, -1};
        const auto tag = static_cast<std::uint64_t>(i);
        EXPECT_TRUE(self.PostSend(peer, tag, std::as_bytes(std::span(mine))).ok());
        EXPECT_TRUE(self.PostRecv(peer, tag, std::as_writable_bytes(std::span(theirs))).ok());
        const absl::Status waited = self.WaitAll();
        ASSERT_TRUE(waited.ok()) << waited;
        ASSERT_EQ(theirs[0], peer);
        ASSERT_EQ(theirs[1], i);
      }
    };
    std::thread peer([&] { run(*b); });
    run(*a);
    peer.join();
    // Concurrently, as separate processes would: each close may need the
    // other to progress.
    std::thread closer([&] { b.reset(); });
    a.reset();
    closer.join();
  }
}

// A child process running ucx_transport_peer, killed and reaped by PID when
// this object goes away, whether or not the test passed.
class PeerProcess {
 public:
  // `args` follow the program name (see ucx_transport_peer.cc).
  static std::unique_ptr<PeerProcess> Spawn(std::vector<std::string> args) {
    auto peer = std::unique_ptr<PeerProcess>(new PeerProcess);
    int to_child[2], from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0) return nullptr;
    if (pipe2(from_child, O_CLOEXEC) != 0) {
      close(to_child[0]);
      close(to_child[1]);
      return nullptr;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], STDOUT_FILENO);
    const std::string path = UCX_TRANSPORT_PEER_PATH;
    args.insert(args.begin(), path);
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const int error =
        posix_spawn(&peer->pid_, path.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(to_child[0]);
    close(from_child[1]);
    peer->to_child_ = to_child[1];
    peer->from_child_ = from_child[0];
    if (error != 0) {
      peer->pid_ = -1;
      return nullptr;
    }
    return peer;
  }

  ~PeerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (to_child_ >= 0) close(to_child_);
    if (from_child_ >= 0) close(from_child_);
  }

  int to_child() const { return to_child_; }
  int from_child() const { return from_child_; }
  void Kill() { kill(pid_, SIGKILL); }
  // Reaps the child; returns its wait status.
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  PeerProcess() = default;
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
};

struct DeadPeerCase {
  std::string name;
  std::optional<std::string> tls;  // UCX_TLS for both processes; nullopt: as inherited
  bool kill;                       // parent kills the child vs. child exits by itself
  bool send;                       // wait on a large send to it instead of a receive
  bool peer_error_handling = true;
  milliseconds timeout = seconds(60);
};

void PrintTo(const DeadPeerCase& param, std::ostream* os) { *os << param.name; }

class UcxDeadPeerTest : public ::testing::TestWithParam<DeadPeerCase> {};

// Rank 0 waits on a peer process that dies without closing anything. Over
// TCP, UCX's peer error handling turns the wait into an error naming rank 1
// at once (so the code is Unavailable, not DeadlineExceeded). Over shared
// memory UCX 1.13 sees nothing, and only the deadline ends the wait: still an
// error naming the peer, never a hang.
TEST_P(UcxDeadPeerTest, WaitOnDeadPeerProcessFailsNamingIt) {
  const DeadPeerCase& param = GetParam();
  std::optional<ScopedEnv> tls;
  if (param.tls) tls.emplace("UCX_TLS", *param.tls);
  std::vector<std::string> args = {param.kill ? "wait" : "exit"};
  if (!param.peer_error_handling) args.push_back("no-peer-errors");
  std::unique_ptr<PeerProcess> child = PeerProcess::Spawn(args);
  ASSERT_NE(child, nullptr);
  std::unique_ptr<UcxTransport> transport = MustCreate(
      0, 2, {.wait_timeout = param.timeout, .peer_error_handling = param.peer_error_handling});
  ASSERT_NE(transport, nullptr);
  tls.reset();

  ASSERT_TRUE(WriteBlob(child->to_child(), transport->WorkerAddress()));
  std::optional<Bytes> child_address = ReadBlob(child->from_child(), seconds(30));
  ASSERT_TRUE(child_address.has_value()) << "the peer process sent no address";
  absl::Status status = transport->Connect({transport->WorkerAddress(), *child_address});
  ASSERT_TRUE(status.ok()) << status;

  const Bytes ping = testing::Pattern(8, 1);
  Bytes pong(8);
  ASSERT_TRUE(transport->PostSend(1, 1, ping).ok());
  ASSERT_TRUE(transport->PostRecv(1, 2, pong).ok());
  status = transport->WaitAll();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(testing::FirstMismatch(pong, ping), -1);

  // Large enough for rendezvous: it cannot complete without the peer.
  Bytes pending(param.send ? (4 << 20) : 16);
  ASSERT_TRUE(
      (param.send ? transport->PostSend(1, 3, pending) : transport->PostRecv(1, 3, pending)).ok());
  if (param.kill) child->Kill();
  status = transport->WaitAll();
  if (param.peer_error_handling) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_THAT(status.message(), HasSubstr("lost connection to rank 1"));
  } else {
    EXPECT_THAT(status.code(), ::testing::AnyOf(absl::StatusCode::kUnavailable,
                                                absl::StatusCode::kDeadlineExceeded))
        << status;
    EXPECT_THAT(status.message(), HasSubstr("rank 1"));
  }

  const int wait_status = child->Wait();
  if (param.kill) {
    EXPECT_TRUE(WIFSIGNALED(wait_status)) << wait_status;
  } else {
    EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) << wait_status;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, UcxDeadPeerTest,
    ::testing::Values(
        DeadPeerCase{.name = "default_exit", .tls = std::nullopt, .kill = false, .send = false},
        DeadPeerCase{.name = "default_kill", .tls = std::nullopt, .kill = true, .send = false},
        DeadPeerCase{.name = "tcp_exit", .tls = "tcp", .kill = false, .send = false},
        DeadPeerCase{.name = "tcp_kill", .tls = "tcp", .kill = true, .send = false},
        DeadPeerCase{.name = "tcp_kill_during_send", .tls = "tcp", .kill = true, .send = true},
        // Shared memory only: UCX would refuse it with peer error handling.
        DeadPeerCase{.name = "shm_exit_deadline_backstop",
                     .tls = "sm",
                     .kill = false,
                     .send = false,
                     .peer_error_handling = false,
                     .timeout = seconds(2)}),
    [](const ::testing::TestParamInfo<DeadPeerCase>& info) { return info.param.name; });

// Under peer error handling, a UCX_TLS of shared memory alone cannot reach a
// peer; Connect() says so and suggests the way out.
TEST(UcxTransportTest, SharedMemoryOnlyWithPeerErrorHandlingIsUnreachable) {
  ScopedEnv tls("UCX_TLS", "sm");
  std::unique_ptr<UcxTransport> a = MustCreate(0, 2);
  std::unique_ptr<UcxTransport> b = MustCreate(1, 2);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  absl::Status status = a->Connect({a->WorkerAddress(), b->WorkerAddress()});
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("peer_error_handling"));
}

}  // namespace
}  // namespace testbed
