// What every Transport must do, checked once per backend (after tensorpipe's
// transport tests): one TEST_P suite over a factory of connected worlds,
// instantiated for the in-process transport and for UCX: with UCX's own
// transport choice (UCX_TLS as the caller left it), forced onto TCP, and on
// shared memory. Each rank runs on its own thread; the UCX ranks each have
// their own context and worker and exchange addresses in memory.
//
// UCX-only behaviour that needs real processes (a peer process that dies) is
// in ucx_transport_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <functional>
#include <latch>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "allreduce/transport/inprocess_transport.h"
#include "allreduce/transport/transport.h"
#include "allreduce/transport/ucx_transport.h"
#include "tests/transport/transport_test_util.h"

namespace testbed {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Bytes;
using testing::FirstMismatch;
using ::testing::HasSubstr;
using testing::Pattern;
using testing::RunOnThreads;
using testing::ScopedEnv;

// Long enough never to fire in a passing test; short enough that a broken
// one fails instead of hanging the suite.
constexpr milliseconds kTimeout = seconds(30);

// A world of connected transports, one per rank, made by one backend.
class TestWorld {
 public:
  virtual ~TestWorld() = default;
  // The transport of `rank`; taken once, by the rank's thread.
  virtual std::unique_ptr<Transport> Take(int rank) = 0;
  // Makes `rank` vanish as a crashed process would; peers waiting on it must
  // then fail with an error naming it.
  virtual void Lose(int rank, std::unique_ptr<Transport> transport) = 0;
};

struct Backend {
  std::string name;
  // Every WaitAll() of the world's transports gives up after `timeout`.
  std::function<absl::StatusOr<std::unique_ptr<TestWorld>>(int world_size, milliseconds timeout)>
      make_world;
  // Whether a lost peer is detected, rather than waited out to the deadline.
  bool detects_lost_peers = true;
};

class InProcessWorld final : public TestWorld {
 public:
  InProcessWorld(int world_size, milliseconds timeout) : fabric_(world_size, timeout) {
    for (int rank = 0; rank < world_size; ++rank) transports_.push_back(fabric_.Connect(rank));
  }
  std::unique_ptr<Transport> Take(int rank) override { return std::move(transports_[rank]); }
  void Lose(int rank, std::unique_ptr<Transport> transport) override {
    fabric_.MarkLost(rank);
    transport.reset();
  }

 private:
  InProcessFabric fabric_;  // outlives the transports: declared first
  std::vector<std::unique_ptr<Transport>> transports_;
};

// All ranks' UCX transports in this process, each with its own context and
// worker, connected through addresses exchanged in memory.
class UcxWorld final : public TestWorld {
 public:
  // `tls`, if set, is put in UCX_TLS while the transports are created.
  static absl::StatusOr<std::unique_ptr<TestWorld>> Make(int world_size, milliseconds timeout,
                                                         std::optional<std::string> tls,
                                                         bool peer_error_handling = true) {
    std::optional<ScopedEnv> env;
    if (tls) env.emplace("UCX_TLS", tls);
    auto world = std::make_unique<UcxWorld>();
    std::vector<std::vector<std::byte>> addresses;
    for (int rank = 0; rank < world_size; ++rank) {
      absl::StatusOr<std::unique_ptr<UcxTransport>> transport = UcxTransport::Create(
          rank, world_size,
          UcxOptions{.wait_timeout = timeout, .peer_error_handling = peer_error_handling});
      if (!transport.ok()) return transport.status();
      addresses.push_back((*transport)->WorkerAddress());
      world->transports_.push_back(*std::move(transport));
    }
    for (std::unique_ptr<Transport>& transport : world->transports_) {
      absl::Status connected = static_cast<UcxTransport&>(*transport).Connect(addresses);
      if (!connected.ok()) return connected;
    }
    return world;
  }

  std::unique_ptr<Transport> Take(int rank) override { return std::move(transports_[rank]); }
  // A destroyed transport closes its connections, which UCX's peer error
  // handling reports to the peers' endpoints.
  void Lose(int rank, std::unique_ptr<Transport> transport) override { transport.reset(); }

 private:
  std::vector<std::unique_ptr<Transport>> transports_;
};

// Hands the backend memory of another kind: every host span a test posts is
// copied into an allocation of `memory` (sends) or received into one and
// copied out when WaitAny() or WaitAll() reports it (receives), by that memory's own operations. On
// fake-device memory a backend that touched the bytes itself would crash.
class MemoryKindTransport final : public Transport {
 public:
  MemoryKindTransport(std::unique_ptr<Transport> inner, MemoryType memory)
      : inner_(std::move(inner)), ops_(MemoryOpsFor(memory)) {}

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string_view name() const override { return inner_->name(); }
  absl::Status PostSend(int peer, std::uint64_t tag, ConstBuffer data) override {
    Allocation& staged = staged_.emplace_back(ops_.Allocate(data.size));
    ops_.Upload(staged.buffer(), std::span(data.data, data.size));
    posted_.push_back({});
    return inner_->PostSend(peer, tag, staged.buffer());
  }
  absl::Status PostRecv(int peer, std::uint64_t tag, MutableBuffer data) override {
    Allocation& staged = staged_.emplace_back(ops_.Allocate(data.size));
    posted_.push_back({staged.buffer(), data});
    return inner_->PostRecv(peer, tag, staged.buffer());
  }
  absl::Status WaitAll() override {
    absl::Status status = inner_->WaitAll();
    if (status.ok()) {
      for (std::size_t i = 0; i < posted_.size(); ++i) Deliver(i);
    }
    posted_.clear();
    staged_.clear();
    return status;
  }
  absl::StatusOr<std::size_t> WaitAny() override {
    absl::StatusOr<std::size_t> index = inner_->WaitAny();
    if (index.ok()) Deliver(*index);
    return index;
  }
  std::vector<PeerTraffic> Traffic() const override { return inner_->Traffic(); }
  void ResetTraffic() override { inner_->ResetTraffic(); }

 private:
  // Copies a completed receive out to the caller's span, once.
  void Deliver(std::size_t index) {
    auto& [from, to] = posted_[index];
    if (to.data != nullptr) ops_.Download(std::span(to.data, to.size), from);
    to = MutableBuffer{};
  }

  std::unique_ptr<Transport> inner_;
  const MemoryOps& ops_;
  std::deque<Allocation> staged_;  // until WaitAll()
  // By operation index: (staged, the caller's) for receives, empty for sends.
  std::vector<std::pair<MutableBuffer, MutableBuffer>> posted_;
};

class MemoryKindWorld final : public TestWorld {
 public:
  MemoryKindWorld(std::unique_ptr<TestWorld> inner, MemoryType memory)
      : inner_(std::move(inner)), memory_(memory) {}
  std::unique_ptr<Transport> Take(int rank) override {
    return std::make_unique<MemoryKindTransport>(inner_->Take(rank), memory_);
  }
  void Lose(int rank, std::unique_ptr<Transport> transport) override {
    inner_->Lose(rank, std::move(transport));
  }

 private:
  std::unique_ptr<TestWorld> inner_;
  MemoryType memory_;
};

// Names the parameter in test output (and in CTest's test names).
void PrintTo(const Backend& backend, std::ostream* os) { *os << backend.name; }

std::vector<Backend> HostBackends();

// Every backend twice: on host memory, and on fake-device memory (what a GPU
// buffer is to a transport that cannot reach it).
std::vector<Backend> AllBackends() {
  std::vector<Backend> all = HostBackends();
  for (const Backend& host : HostBackends()) {
    Backend device = host;
    device.name += "_fake_device";
    device.make_world = [make = host.make_world](int n, milliseconds timeout)
        -> absl::StatusOr<std::unique_ptr<TestWorld>> {
      absl::StatusOr<std::unique_ptr<TestWorld>> world = make(n, timeout);
      if (!world.ok()) return world.status();
      return std::make_unique<MemoryKindWorld>(*std::move(world), MemoryType::kFakeDevice);
    };
    all.push_back(device);
  }
  return all;
}

std::vector<Backend> HostBackends() {
  return {
      {"inprocess",
       [](int n, milliseconds timeout) -> absl::StatusOr<std::unique_ptr<TestWorld>> {
         return std::make_unique<InProcessWorld>(n, timeout);
       }},
      // Whatever UCX picks from the environment (UCX_TLS, if the caller set it).
      {"ucx", [](int n, milliseconds timeout) { return UcxWorld::Make(n, timeout, std::nullopt); }},
      {"ucx_tcp", [](int n, milliseconds timeout) { return UcxWorld::Make(n, timeout, "tcp"); }},
      // Shared memory (UCX 1.13: sysv for messages, cma for rendezvous). UCX
      // accepts it only without peer error handling, and cannot see a lost
      // peer over it.
      {"ucx_shm",
       [](int n, milliseconds timeout) {
         return UcxWorld::Make(n, timeout, "sm", /*peer_error_handling=*/false);
       },
       /*detects_lost_peers=*/false},
  };
}

class TransportConformanceTest : public ::testing::TestWithParam<Backend> {
 protected:
  std::unique_ptr<TestWorld> MakeWorld(int world_size, milliseconds timeout = kTimeout) {
    absl::StatusOr<std::unique_ptr<TestWorld>> world = GetParam().make_world(world_size, timeout);
    EXPECT_TRUE(world.ok()) << world.status();
    return world.ok() ? *std::move(world) : nullptr;
  }
};

TEST_P(TransportConformanceTest, NameMatchesBackend) {
  std::unique_ptr<TestWorld> world = MakeWorld(1);
  ASSERT_NE(world, nullptr);
  std::unique_ptr<Transport> transport = world->Take(0);
  EXPECT_EQ(transport->rank(), 0);
  EXPECT_EQ(transport->world_size(), 1);
  EXPECT_THAT(GetParam().name, ::testing::StartsWith(std::string(transport->name())));
}

TEST_P(TransportConformanceTest, PingPongOfVariousSizesArrivesIntact) {
  std::unique_ptr<TestWorld> world = MakeWorld(2);
  ASSERT_NE(world, nullptr);
  // Eager, just past a page, and large enough for UCX's rendezvous protocol.
  const std::vector<std::size_t> sizes = {1, 4097, 8 << 20};
  RunOnThreads(2, [&](int rank) {
    std::unique_ptr<Transport> transport = world->Take(rank);
    const int peer = 1 - rank;
    for (std::size_t size : sizes) {
      for (std::uint64_t round = 0; round < 3; ++round) {
        const Bytes ping = Pattern(size, static_cast<std::uint32_t>(round));
        const Bytes pong = Pattern(size, static_cast<std::uint32_t>(round + 100));
        Bytes received(size);
        const std::uint64_t tag = round * 2;
        if (rank == 0) {
          ASSERT_TRUE(transport->PostSend(peer, tag, ping).ok());
          ASSERT_TRUE(transport->WaitAll().ok());
          ASSERT_TRUE(transport->PostRecv(peer, tag + 1, received).ok());
          absl::Status status = transport->WaitAll();
          ASSERT_TRUE(status.ok()) << status;
          EXPECT_EQ(FirstMismatch(received, pong), -1) << "size " << size << " round " << round;
        } else {
          ASSERT_TRUE(transport->PostRecv(peer, tag, received).ok());
          absl::Status status = transport->WaitAll();
          ASSERT_TRUE(status.ok()) << status;
          EXPECT_EQ(FirstMismatch(received, ping), -1) << "size " << size << " round " << round;
          ASSERT_TRUE(transport->PostSend(peer, tag + 1, pong).ok());
          ASSERT_TRUE(transport->WaitAll().ok());
        }
      }
    }
  });
}

// Hundreds of MiB in one message: the rendezvous path, moved in one go.
TEST_P(TransportConformanceTest, LargeMessageArrivesIntact) {
  constexpr std::size_t kSize = std::size_t{256} << 20;
  std::unique_ptr<TestWorld> world = MakeWorld(2);
  ASSERT_NE(world, nullptr);
  const Bytes sent = Pattern(kSize, 7);
  RunOnThreads(2, [&](int rank) {
    std::unique_ptr<Transport> transport = world->Take(rank);
    if (rank == 0) {
      ASSERT_TRUE(transport->PostSend(1, 42, sent).ok());
      absl::Status status = transport->WaitAll();
      EXPECT_TRUE(status.ok()) << status;
    } else {
      Bytes received(kSize);
      ASSERT_TRUE(transport->PostRecv(0, 42, received).ok());
      absl::Status status = transport->WaitAll();
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(FirstMismatch(received, sent), -1);
    }
  });
}

// What rank `from` sends to rank `to` as its message number `k`: sizes differ
// per pair and per message, from one byte to past the rendezvous threshold.
std::size_t AllPairsSize(int from, int to, int k) {
  static constexpr std::size_t kSizes[] = {1, 100, 4097, 65536, 300001, 17};
  return kSizes[(k + from + 2 * to) % std::size(kSizes)] + static_cast<std::size_t>(from);
}
std::uint32_t AllPairsSeed(int from, int to, int k) {
  return static_cast<std::uint32_t>(from * 10000 + to * 100 + k);
}

// Every rank exchanges several messages with every other rank, all posted
// before one WaitAll(). Receives are posted in the reverse of the send order
// (and interleaved with sends), so only tags can match them up.
TEST_P(TransportConformanceTest, AllPairsManyMessagesInFlightMatchByTag) {
  constexpr int kWorld = 5;
  constexpr int kPerPair = 6;
  std::unique_ptr<TestWorld> world = MakeWorld(kWorld);
  ASSERT_NE(world, nullptr);
  RunOnThreads(kWorld, [&](int rank) {
    std::unique_ptr<Transport> transport = world->Take(rank);
    std::vector<Bytes> outgoing;
    std::vector<Bytes> incoming;
    std::vector<Bytes> expected;
    outgoing.reserve(kWorld * kPerPair);
    incoming.reserve(kWorld * kPerPair);
    for (int step = 0; step < kPerPair; ++step) {
      for (int peer = 0; peer < kWorld; ++peer) {
        if (peer == rank) continue;
        // Send message `step`; receive message `kPerPair - 1 - step`.
        const int k_send = step;
        const Bytes& out = outgoing.emplace_back(
            Pattern(AllPairsSize(rank, peer, k_send), AllPairsSeed(rank, peer, k_send)));
        ASSERT_TRUE(transport->PostSend(peer, static_cast<std::uint64_t>(k_send), out).ok());
        const int k_recv = kPerPair - 1 - step;
        expected.push_back(
            Pattern(AllPairsSize(peer, rank, k_recv), AllPairsSeed(peer, rank, k_recv)));
        Bytes& in = incoming.emplace_back(expected.back().size());
        ASSERT_TRUE(transport->PostRecv(peer, static_cast<std::uint64_t>(k_recv), in).ok());
      }
    }
    absl::Status status = transport->WaitAll();
    ASSERT_TRUE(status.ok()) << status;
    for (std::size_t i = 0; i < incoming.size(); ++i) {
      EXPECT_EQ(FirstMismatch(incoming[i], expected[i]), -1) << "rank " << rank << " message " << i;
    }
  });
}

// The counters hold the payload moved with each peer, by rank; sizes differ
// per direction so a swapped index shows.
TEST_P(TransportConformanceTest, TrafficCountsPayloadPerPeerAndResets) {
  constexpr int kWorld = 3;
  std::unique_ptr<TestWorld> world = MakeWorld(kWorld);
  ASSERT_NE(world, nullptr);
  auto size = [](int from, int to, int round) {
    return static_cast<std::size_t>(1000 * (from + 1) + 10 * to + round);
  };
  RunOnThreads(kWorld, [&](int rank) {
    std::unique_ptr<Transport> transport = world->Take(rank);
    for (const PeerTraffic& traffic : transport->Traffic()) {
      EXPECT_EQ(traffic.bytes_sent + traffic.bytes_received, 0u);
    }
    for (int round = 0; round < 2; ++round) {
      std::vector<Bytes> buffers;
      buffers.reserve(4 * kWorld);  // no reallocation: posted spans point into it
      for (int peer = 0; peer < kWorld; ++peer) {
        if (peer == rank) continue;
        // Two messages to each peer, one back from it.
        for (std::uint64_t tag : {0, 1}) {
          absl::Status posted =
              transport->PostSend(peer, tag, buffers.emplace_back(size(rank, peer, round)));
          ASSERT_TRUE(posted.ok()) << posted;
        }
        absl::Status posted =
            transport->PostRecv(peer, 0, buffers.emplace_back(size(peer, rank, round)));
        ASSERT_TRUE(posted.ok()) << posted;
      }
      // The second message from each peer is received after all the first.
      for (int peer = 0; peer < kWorld; ++peer) {
        if (peer == rank) continue;
        absl::Status posted =
            transport->PostRecv(peer, 1, buffers.emplace_back(size(peer, rank, round)));
        ASSERT_TRUE(posted.ok()) << posted;
      }
      absl::Status status = transport->WaitAll();
      ASSERT_TRUE(status.ok()) << status;

      const std::vector<PeerTraffic> traffic = transport->Traffic();
      ASSERT_EQ(traffic.size(), static_cast<std::size_t>(kWorld));
      for (int peer = 0; peer < kWorld; ++peer) {
        SCOPED_TRACE(::testing::Message()
                     << "rank " << rank << " peer " << peer << " round " << round);
        if (peer == rank) {
          EXPECT_EQ(traffic[peer].bytes_sent + traffic[peer].bytes_received, 0u);
          continue;
        }
        EXPECT_EQ(traffic[peer].bytes_sent, 2 * size(rank, peer, round));
        EXPECT_EQ(traffic[peer].bytes_received, 2 * size(peer, rank, round));
        EXPECT_EQ(traffic[peer].messages_sent, 2u);
        EXPECT_EQ(traffic[peer].messages_received, 2u);
      }
      transport->ResetTraffic();
      for (const PeerTraffic& zeroed : transport->Traffic()) {
        EXPECT_EQ(zeroed.bytes_sent, 0u);
        EXPECT_EQ(zeroed.bytes_received, 0u);
        EXPECT_EQ(zeroed.messages_sent, 0u);
        EXPECT_EQ(zeroed.messages_received, 0u);
      }
    }
  });
}

TEST_P(TransportConformanceTest, ZeroLengthMessageCompletes) {
  std::unique_ptr<TestWorld> world = MakeWorld(2);
  ASSERT_NE(world, nullptr);
  RunOnThreads(2, [&](int rank) {
    std::unique_ptr<Transport> transport = world->Take(rank);
    if (rank == 0) {
      ASSERT_TRUE(transport->PostSend(1, 3, {}).ok());
    } else {
      ASSERT_TRUE(transport->PostRecv(0, 3, {}).ok());
    }
    absl::Status status = transport->WaitAll();
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_EQ(
        transport->Traffic()[1 - rank].bytes_sent + transport->Traffic()[1 - rank].bytes_received,
        0u);
  });
}

TEST_P(TransportConformanceTest, BadPeerIsInvalidArgument) {
  std::unique_ptr<TestWorld> world = MakeWorld(2);
  ASSERT_NE(world, nullptr);
  std::unique_ptr<Transport> transport = world->Take(0);
  Bytes buffer(8);
  for (int peer : {-1, 0, 2}) {
    EXPECT_EQ(transport->PostSend(peer, 0, buffer).code(), absl::StatusCode::kInvalidArgument)
        << "peer " << peer;
    EXPECT_EQ(transport->PostRecv(peer, 0, buffer).code(), absl::StatusCode::kInvalidArgument)
        << "peer " << peer;
  }
}

struct Mismatch {
  std::size_t sent;
  std::size_t posted;
};

// A receive posted with a size other than the one sent fails on the
// receiving side, naming the sender, in either direction and for eager and
// rendezvous sizes alike. The sender may succeed or fail, but must return.
TEST_P(TransportConformanceTest, SizeMismatchIsAnErrorNotAHang) {
  const std::vector<Mismatch> cases = {
      {100, 50}, {100, 200}, {1 << 20, 512 << 10}, {512 << 10, 1 << 20}};
  for (const Mismatch& mismatch : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "sent " << mismatch.sent << ", posted " << mismatch.posted);
    // Short: the in-process sender waits out its deadline for a consumer.
    std::unique_ptr<TestWorld> world = MakeWorld(2, seconds(2));
    ASSERT_NE(world, nullptr);
    RunOnThreads(2, [&](int rank) {
      std::unique_ptr<Transport> transport = world->Take(rank);
      if (rank == 0) {
        const Bytes data = Pattern(mismatch.sent, 1);
        ASSERT_TRUE(transport->PostSend(1, 9, data).ok());
        transport->WaitAll().IgnoreError();
      } else {
        Bytes data(mismatch.posted);
        ASSERT_TRUE(transport->PostRecv(0, 9, data).ok());
        absl::Status status = transport->WaitAll();
        EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
        EXPECT_THAT(status.message(), HasSubstr("rank 0"));
      }
    });
  }
}

// A peer that never sends: the wait ends with DeadlineExceeded naming it.
TEST_P(TransportConformanceTest, WaitTimesOutWhenPeerNeverSends) {
  std::unique_ptr<TestWorld> world = MakeWorld(2, milliseconds(300));
  ASSERT_NE(world, nullptr);
  std::latch rank0_done(1);
  RunOnThreads(2, [&](int rank) {
    std::unique_ptr<Transport> transport = world->Take(rank);
    if (rank == 0) {
      Bytes data(16);
      ASSERT_TRUE(transport->PostRecv(1, 5, data).ok());
      absl::Status status = transport->WaitAll();
      EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
      EXPECT_THAT(status.message(), HasSubstr("rank 1"));
      // Unusable afterwards, and says so instead of hanging.
      EXPECT_FALSE(transport->WaitAll().ok());
    }
    // Rank 1 stays alive (it is slow, not lost) until rank 0 has timed out.
    if (rank == 0) rank0_done.count_down();
    rank0_done.wait();
  });
}

// A rank that vanishes while others wait on it (with WaitAll, or WaitAny if
// `any`): they fail with an error naming it, well before their deadline.
void ExpectLostPeerFailsWaitNamingIt(const Backend& backend, bool any) {
  constexpr int kWorld = 3;
  constexpr int kLost = 2;
  absl::StatusOr<std::unique_ptr<TestWorld>> made = backend.make_world(kWorld, seconds(60));
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<TestWorld> world = *std::move(made);
  std::latch connected(kWorld);
  std::latch waiting(kWorld - 1);
  RunOnThreads(kWorld, [&](int rank) {
    std::unique_ptr<Transport> transport = world->Take(rank);
    // One exchange with the doomed rank first, so every connection is up.
    Bytes out = Pattern(64, rank);
    std::vector<Bytes> in(kWorld, Bytes(64));
    for (int peer = 0; peer < kWorld; ++peer) {
      if (peer == rank || (rank != kLost && peer != kLost)) continue;
      ASSERT_TRUE(transport->PostSend(peer, 1, out).ok());
      ASSERT_TRUE(transport->PostRecv(peer, 1, in[peer]).ok());
    }
    absl::Status warmup = transport->WaitAll();
    connected.count_down();
    ASSERT_TRUE(warmup.ok()) << warmup;
    connected.wait();
    if (rank == kLost) {
      waiting.wait();
      world->Lose(rank, std::move(transport));
      return;
    }
    Bytes data(64);
    absl::Status posted = transport->PostRecv(kLost, 2, data);
    waiting.count_down();  // even on failure: rank 2 must not wait forever
    ASSERT_TRUE(posted.ok()) << posted;
    absl::Status status = any ? transport->WaitAny().status() : transport->WaitAll();
    // Not kDeadlineExceeded: the loss was detected, not waited out.
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_THAT(status.message(), HasSubstr("rank 2"));
  });
}

TEST_P(TransportConformanceTest, LostPeerFailsWaitNamingIt) {
  if (!GetParam().detects_lost_peers) {
    GTEST_SKIP() << GetParam().name << " cannot see a lost peer; the deadline is the backstop";
  }
  ExpectLostPeerFailsWaitNamingIt(GetParam(), /*any=*/false);
}

TEST_P(TransportConformanceTest, LostPeerFailsWaitAnyNamingIt) {
  if (!GetParam().detects_lost_peers) {
    GTEST_SKIP() << GetParam().name << " cannot see a lost peer; the deadline is the backstop";
  }
  ExpectLostPeerFailsWaitNamingIt(GetParam(), /*any=*/true);
}

// WaitAny() reports operations one at a time, as they complete, by their
// index since the last WaitAll(), each once; a received message is in place
// when it is reported. Rank 1 sends the three messages in the reverse of the
// order rank 0 posted its receives, one only after the previous was reported.
TEST_P(TransportConformanceTest, WaitAnyReportsEachCompletionOnceByIndex) {
  std::unique_ptr<TestWorld> world = MakeWorld(2);
  ASSERT_NE(world, nullptr);
  // Rendezvous-sized as well as eager-sized messages.
  const std::vector<std::size_t> sizes = {17, 300001, 4097};
  std::deque<std::latch> reported;
  for (std::size_t i = 0; i < sizes.size(); ++i) reported.emplace_back(1);
  RunOnThreads(2, [&](int rank) {
    std::unique_ptr<Transport> transport = world->Take(rank);
    if (rank == 1) {
      for (int tag = 2; tag >= 0; --tag) {
        const Bytes out = Pattern(sizes[tag], tag);
        ASSERT_TRUE(transport->PostSend(0, tag, out).ok());
        absl::Status sent = transport->WaitAll();
        ASSERT_TRUE(sent.ok()) << sent;
        reported[tag].wait();
      }
      return;
    }
    std::vector<Bytes> in;
    for (std::size_t size : sizes) in.emplace_back(size);
    for (int tag = 0; tag < 3; ++tag) ASSERT_TRUE(transport->PostRecv(1, tag, in[tag]).ok());
    for (int tag = 2; tag >= 0; --tag) {
      absl::StatusOr<std::size_t> index = transport->WaitAny();
      if (!index.ok()) {
        for (std::latch& latch : reported) latch.count_down();  // rank 1 must not hang
        FAIL() << index.status();
      }
      EXPECT_EQ(*index, static_cast<std::size_t>(tag));
      EXPECT_EQ(FirstMismatch(in[tag], Pattern(sizes[tag], tag)), -1) << "tag " << tag;
      reported[tag].count_down();
    }
    EXPECT_EQ(transport->WaitAny().status().code(), absl::StatusCode::kFailedPrecondition);
    absl::Status all = transport->WaitAll();
    EXPECT_TRUE(all.ok()) << all;
  });
}

// Sends are reported too, and WaitAll() restarts the numbering.
TEST_P(TransportConformanceTest, WaitAnyReportsSendsAndRestartsAfterWaitAll) {
  std::unique_ptr<TestWorld> world = MakeWorld(2);
  ASSERT_NE(world, nullptr);
  RunOnThreads(2, [&](int rank) {
    std::unique_ptr<Transport> transport = world->Take(rank);
    std::vector<Bytes> data(4, Pattern(1000, 3));
    for (std::uint64_t batch = 0; batch < 2; ++batch) {
      if (rank == 0) {
        ASSERT_TRUE(transport->PostSend(1, 2 * batch, data[2 * batch]).ok());
        ASSERT_TRUE(transport->PostSend(1, 2 * batch + 1, data[2 * batch + 1]).ok());
        std::vector<std::size_t> seen;
        for (int i = 0; i < 2; ++i) {
          absl::StatusOr<std::size_t> index = transport->WaitAny();
          ASSERT_TRUE(index.ok()) << index.status();
          seen.push_back(*index);
        }
        EXPECT_THAT(seen, ::testing::UnorderedElementsAre(0u, 1u));
      } else {
        ASSERT_TRUE(transport->PostRecv(0, 2 * batch, data[2 * batch]).ok());
        ASSERT_TRUE(transport->PostRecv(0, 2 * batch + 1, data[2 * batch + 1]).ok());
      }
      absl::Status all = transport->WaitAll();
      ASSERT_TRUE(all.ok()) << all;
    }
  });
}

// WaitAny() has the same deadline as WaitAll().
TEST_P(TransportConformanceTest, WaitAnyTimesOutWhenPeerNeverSends) {
  std::unique_ptr<TestWorld> world = MakeWorld(2, milliseconds(300));
  ASSERT_NE(world, nullptr);
  std::latch rank0_done(1);
  RunOnThreads(2, [&](int rank) {
    std::unique_ptr<Transport> transport = world->Take(rank);
    if (rank == 0) {
      Bytes data(16);
      ASSERT_TRUE(transport->PostRecv(1, 5, data).ok());
      absl::StatusOr<std::size_t> index = transport->WaitAny();
      EXPECT_EQ(index.status().code(), absl::StatusCode::kDeadlineExceeded) << index.status();
      EXPECT_THAT(index.status().message(), HasSubstr("rank 1"));
      rank0_done.count_down();
    }
    rank0_done.wait();
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, TransportConformanceTest, ::testing::ValuesIn(AllBackends()),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace testbed
