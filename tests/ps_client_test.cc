// PsClient (worker/ps_client.cc) against real parameter-server shards in this
// process, over gRPC on loopback: what PushPull leaves in the worker's buffer
// must be what the shards served, slice by slice, not what was pushed. The
// sweep's N = 1 ps run cannot tell these apart (one worker's input already is
// the sum), so the buffer here holds something else than the served values:
// a gradient under SGD (served: -lr g), or one worker's part of a sum of two.
// Full duplex: the client reads values while it still pushes, and a shard
// serves a chunk before the pushes end (each fails on the code before it).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "allreduce/cost_model.h"
#include "allreduce/memory.h"
#include "proto/chunk_wire.h"
#include "proto/credentials.h"
#include "proto/parameter_server.grpc.pb.h"
#include "server/in_process_shard.h"
#include "tests/process_runner.h"
#include "worker/ps_client.h"

namespace testbed {
namespace {

const Credentials kCredentials{"job-1", "secret"};

// The cost model's full-duplex estimate assumes the chunk both sides use.
static_assert(PsClient::kChunkBytes == kParameterServerChunkBytes);
static_assert(ParameterStore::kDefaultChunkBytes == kParameterServerChunkBytes);

class PsClientTest : public ::testing::TestWithParam<int> {  // the number of shards
 protected:
  void SetUp() override {
    for (int s = 0; s < GetParam(); ++s) {
      absl::StatusOr<std::unique_ptr<InProcessShard>> shard =
          InProcessShard::Start(kCredentials, std::chrono::seconds(10));
      ASSERT_TRUE(shard.ok()) << shard.status();
      addresses_.push_back((*shard)->address());
      shards_.push_back(*std::move(shard));
    }
  }

  std::unique_ptr<PsClient> Client() {
    return std::make_unique<PsClient>(addresses_, kCredentials, std::chrono::seconds(20));
  }

  static proto::TensorSpec Tensor(std::int64_t count, int workers, proto::Optimizer::Kind kind) {
    proto::TensorSpec tensor;
    tensor.set_name("t");
    tensor.set_count(count);
    tensor.set_dtype(proto::Dtype::float32);
    tensor.set_workers(workers);
    tensor.mutable_optimizer()->set_kind(kind);
    if (kind == proto::Optimizer::SGD) tensor.mutable_optimizer()->set_learning_rate(1);
    return tensor;
  }

  static std::span<std::byte> Bytes(std::vector<float>& v) {
    return std::as_writable_bytes(std::span<float>(v));
  }

  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<InProcessShard>> shards_;  // stopped when destroyed
};

// One worker (N = 1), SGD with lr 1 from zero: every step serves -(sum of the
// gradients pushed so far), never the gradient just pushed.
TEST_P(PsClientTest, OneWorkerGetsTheServedValuesNotItsOwnGradient) {
  constexpr std::int64_t kCount = 300007;  // > one chunk, odd: uneven slices
  auto client = Client();
  ASSERT_TRUE(client->Declare(Tensor(kCount, 1, proto::Optimizer::SGD)).ok());
  std::vector<float> data(kCount);
  for (std::uint64_t step = 1; step <= 3; ++step) {
    for (std::int64_t i = 0; i < kCount; ++i) data[i] = static_cast<float>(i % 97 + 1);
    const absl::Status st = client->PushPull("t", 0, step, Bytes(data));
    ASSERT_TRUE(st.ok()) << st;
    std::int64_t wrong = 0, first = -1;
    for (std::int64_t i = 0; i < kCount; ++i) {
      if (data[i] != -static_cast<float>(step * (i % 97 + 1))) {
        if (first < 0) first = i;
        ++wrong;
      }
    }
    EXPECT_EQ(wrong, 0) << "step " << step << ", first at element " << first << ": "
                        << (first >= 0 ? data[first] : 0);
  }
}

// Tensors declared one after another are each pushed in their own slices
// and encoding (a training run declares one per bucket): a client that kept
// only the last declaration would push the first with the second's slices.
TEST_P(PsClientTest, EachDeclaredTensorKeepsItsOwnSlicesAndEncoding) {
  auto client = Client();
  proto::TensorSpec large = Tensor(1001, 1, proto::Optimizer::SGD);
  large.set_name("large");
  proto::TensorSpec small = Tensor(7, 1, proto::Optimizer::SGD);
  small.set_name("small");
  small.set_push_encoding(proto::TensorSpec::FP16);
  ASSERT_TRUE(client->Declare(large).ok());
  ASSERT_TRUE(client->Declare(small).ok());
  std::vector<float> big(1001), little(7);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 13 + 1);
  for (std::size_t i = 0; i < little.size(); ++i) little[i] = 0.5f * static_cast<float>(i + 1);
  ASSERT_TRUE(client->PushPull("large", 0, 1, Bytes(big)).ok());
  ASSERT_TRUE(client->PushPull("small", 0, 1, Bytes(little)).ok());
  for (std::size_t i = 0; i < big.size(); ++i) {
    ASSERT_EQ(big[i], -static_cast<float>(i % 13 + 1)) << "large, element " << i;
  }
  for (std::size_t i = 0; i < little.size(); ++i) {
    ASSERT_EQ(little[i], -0.5f * static_cast<float>(i + 1)) << "small, element " << i;
  }
  const std::uint64_t pushed = std::accumulate(
      client->traffic().begin(), client->traffic().end(), std::uint64_t{0},
      [](std::uint64_t sum, const ShardTraffic& t) { return sum + t.bytes_pushed; });
  EXPECT_EQ(pushed, 4u * 1001 + 2u * 7) << "large as floats, small as halves";
  ASSERT_TRUE(client->Forget("small").ok());
  EXPECT_EQ(client->PushPull("small", 0, 2, Bytes(little)).code(),
            absl::StatusCode::kFailedPrecondition);
}

// Two workers, plain sum: each gets the sum, which neither pushed.
TEST_P(PsClientTest, EachOfTwoWorkersGetsTheSum) {
  constexpr std::int64_t kCount = 1001;
  auto a = Client(), b = Client();
  ASSERT_TRUE(a->Declare(Tensor(kCount, 2, proto::Optimizer::NONE)).ok());
  ASSERT_TRUE(b->Declare(Tensor(kCount, 2, proto::Optimizer::NONE)).ok());
  std::vector<float> first(kCount), second(kCount);
  for (std::int64_t i = 0; i < kCount; ++i) {
    first[i] = static_cast<float>(i);
    second[i] = static_cast<float>(1000 * (i % 7));
  }
  absl::Status first_status;
  std::thread worker0([&] { first_status = a->PushPull("t", 0, 1, Bytes(first)); });
  const absl::Status second_status = b->PushPull("t", 1, 1, Bytes(second));
  worker0.join();
  ASSERT_TRUE(first_status.ok()) << first_status;
  ASSERT_TRUE(second_status.ok()) << second_status;
  for (std::int64_t i = 0; i < kCount; ++i) {
    const float sum = static_cast<float>(i + 1000 * (i % 7));
    ASSERT_EQ(first[i], sum) << "worker 0, element " << i;
    ASSERT_EQ(second[i], sum) << "worker 1, element " << i;
  }
  EXPECT_EQ(a->traffic().size(), static_cast<std::size_t>(GetParam()));
}

// Four workers, tensors of several chunks per shard, several steps: pushes
// and pulls interleave chunk by chunk on every stream (the values of a chunk
// overwrite pushed bytes while later chunks are still being pushed), and
// every worker ends each step with the exact sum.
TEST_P(PsClientTest, FourWorkersOverManyChunksAndStepsGetTheExactSum) {
  constexpr std::int64_t kCount = 3 * (PsClient::kChunkBytes / sizeof(float)) + 12345;
  constexpr std::uint32_t kWorkers = 4;
  constexpr std::uint64_t kSteps = 3;
  std::vector<std::unique_ptr<PsClient>> clients;
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    clients.push_back(Client());
    ASSERT_TRUE(clients.back()->Declare(Tensor(kCount, kWorkers, proto::Optimizer::NONE)).ok());
  }
  const auto gradient = [](std::uint32_t w, std::uint64_t step, std::int64_t i) {
    return static_cast<float>(step * 100 + w * 10 + i % 9);
  };
  std::vector<std::int64_t> wrong(kWorkers, 0);
  std::vector<absl::Status> status(kWorkers);
  std::vector<std::thread> threads;
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      std::vector<float> data(kCount);
      for (std::uint64_t step = 1; step <= kSteps && status[w].ok(); ++step) {
        for (std::int64_t i = 0; i < kCount; ++i) data[i] = gradient(w, step, i);
        status[w] = clients[w]->PushPull("t", w, step, Bytes(data));
        for (std::int64_t i = 0; i < kCount; ++i) {
          wrong[w] += data[i] != static_cast<float>(step * 400 + 60 + 4 * (i % 9));
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (std::uint32_t w = 0; w < kWorkers; ++w) EXPECT_TRUE(status[w].ok()) << status[w];
  EXPECT_EQ(wrong, std::vector<std::int64_t>(kWorkers, 0));
  std::uint64_t pushed = 0, pulled = 0;
  for (const ShardTraffic& t : clients[0]->traffic()) {
    pushed += t.bytes_pushed;
    pulled += t.bytes_pulled;
  }
  EXPECT_EQ(pushed, kSteps * kCount * sizeof(float));
  EXPECT_EQ(pulled, kSteps * kCount * sizeof(float));
}

// A tensor in fake-device memory (pages no host code may touch outside the
// memory's own operations, as a GPU's): gRPC is host-only, so the client
// stages it chunk by chunk - a stray host read or write of the tensor would
// crash - through a few bounce buffers it reuses from step to step. Every
// step moves the payload exactly (the sum, the bytes pushed and pulled), and
// stages each byte once each way.
TEST_P(PsClientTest, FakeDeviceTensorIsStagedChunkByChunkThroughAFewReusedBuffers) {
  constexpr std::int64_t kCount = 5 * (PsClient::kChunkBytes / sizeof(float)) + 12345;
  constexpr std::size_t kBytes = kCount * sizeof(float);
  constexpr std::uint32_t kWorkers = 2;
  constexpr std::uint64_t kSteps = 8;
  const MemoryOps& device = MemoryOpsFor(MemoryType::kFakeDevice);
  std::vector<std::unique_ptr<PsClient>> clients;
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    clients.push_back(Client());
    ASSERT_TRUE(clients.back()->Declare(Tensor(kCount, kWorkers, proto::Optimizer::NONE)).ok());
  }
  const auto gradient = [](std::uint32_t w, std::uint64_t step, std::int64_t i) {
    return static_cast<float>(step * 100 + w * 10 + i % 9);
  };
  std::vector<std::int64_t> wrong(kWorkers, 0);
  std::vector<absl::Status> status(kWorkers);
  std::vector<std::uint64_t> staged(kWorkers, 0), moved(kWorkers, 0);
  std::vector<std::thread> threads;
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      const Allocation tensor = device.Allocate(kBytes);
      std::vector<float> host(kCount);
      for (std::uint64_t step = 1; step <= kSteps && status[w].ok(); ++step) {
        for (std::int64_t i = 0; i < kCount; ++i) host[i] = gradient(w, step, i);
        device.Upload(tensor.buffer(), std::as_bytes(std::span(host)));
        clients[w]->ResetTraffic();
        status[w] = clients[w]->PushPull("t", w, step, tensor.buffer());
        staged[w] += clients[w]->staged_bytes();
        for (const ShardTraffic& t : clients[w]->traffic()) {
          moved[w] += t.bytes_pushed + t.bytes_pulled;
        }
        std::ranges::fill(host, -1.0f);
        device.Download(Bytes(host), tensor.buffer());
        for (std::int64_t i = 0; i < kCount; ++i) {
          wrong[w] += host[i] != static_cast<float>(step * 200 + 10 + 2 * (i % 9));
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    SCOPED_TRACE(w);
    EXPECT_TRUE(status[w].ok()) << status[w];
    EXPECT_EQ(wrong[w], 0);
    EXPECT_EQ(moved[w], 2 * kSteps * kBytes);   // the closed form: M out, M in, per step
    EXPECT_EQ(staged[w], 2 * kSteps * kBytes);  // each byte down once and up once
    const StagingPool::Stats stats = clients[w]->staging_stats();
    const auto shards = static_cast<std::uint64_t>(GetParam());
    // Per shard and size class (whole chunks, a slice's short last chunk)
    // at most kStagedChunksPerShard pushed chunks in gRPC's hands and one
    // pulled chunk being copied up; never one per chunk of the tensor (6 per
    // step, each way: 96 here).
    EXPECT_LE(stats.allocations, 2 * (PsClient::kStagedChunksPerShard + 1) * shards);
    EXPECT_GE(stats.leases, 2 * kSteps * 6);
    // Every buffer holds a chunk at most, never the whole tensor or a slice.
    EXPECT_LE(stats.allocated_bytes, stats.allocations * PsClient::kChunkBytes);
    std::printf("S=%d worker %u: %llu buffers (%llu bytes) for %llu staged chunks\n", GetParam(),
                w, static_cast<unsigned long long>(stats.allocations),
                static_cast<unsigned long long>(stats.allocated_bytes),
                static_cast<unsigned long long>(stats.leases));
  }
}

// The FP16 push encoding: each worker's push travels as halves, exactly half
// the float32 bytes per shard, while the pulls stay float32; the shards sum
// the half-rounded gradients. Over several chunks per shard (a chunk is the
// same elements as a dense one), host memory and fake-device memory alike.
TEST_P(PsClientTest, Fp16PushMovesHalfTheBytesAndTheShardsSumTheHalfRoundedValues) {
  constexpr std::int64_t kCount = 2 * (PsClient::kChunkBytes / sizeof(float)) + 4321;
  constexpr std::uint32_t kWorkers = 2;
  const auto gradient = [](std::uint32_t w, std::int64_t i) {
    // Small integers (exact in half) for worker 0; worker 1's thirds round.
    return w == 0 ? static_cast<float>(i % 2001 - 1000) : static_cast<float>(i % 97) / 3.0f;
  };
  const auto rounded = [](float v) { return HalfToFloat(FloatToHalf(v)); };
  for (const MemoryType memory : {MemoryType::kHost, MemoryType::kFakeDevice}) {
    SCOPED_TRACE(memory == MemoryType::kHost ? "host" : "fake-device");
    const MemoryOps& ops = MemoryOpsFor(memory);
    proto::TensorSpec spec = Tensor(kCount, kWorkers, proto::Optimizer::NONE);
    spec.set_name(memory == MemoryType::kHost ? "host" : "device");
    spec.set_push_encoding(proto::TensorSpec::FP16);
    std::vector<std::unique_ptr<PsClient>> clients;
    for (std::uint32_t w = 0; w < kWorkers; ++w) {
      clients.push_back(Client());
      ASSERT_TRUE(clients.back()->Declare(spec).ok());
    }
    std::vector<std::vector<float>> result(kWorkers, std::vector<float>(kCount));
    std::vector<absl::Status> status(kWorkers);
    std::vector<std::thread> threads;
    for (std::uint32_t w = 0; w < kWorkers; ++w) {
      threads.emplace_back([&, w] {
        std::vector<float>& host = result[w];
        for (std::int64_t i = 0; i < kCount; ++i) host[i] = gradient(w, i);
        const Allocation tensor = ops.Allocate(kCount * sizeof(float));
        ops.Upload(tensor.buffer(), std::as_bytes(std::span(host)));
        status[w] = clients[w]->PushPull(spec.name(), w, 1, tensor.buffer());
        ops.Download(Bytes(host), tensor.buffer());
      });
    }
    for (std::thread& t : threads) t.join();
    for (std::uint32_t w = 0; w < kWorkers; ++w) {
      ASSERT_TRUE(status[w].ok()) << status[w];
      std::int64_t wrong = 0;
      for (std::int64_t i = 0; i < kCount; ++i) {
        wrong += result[w][i] != rounded(gradient(0, i)) + rounded(gradient(1, i));
      }
      EXPECT_EQ(wrong, 0) << "worker " << w;
      EXPECT_NE(result[w][1], gradient(0, 1) + gradient(1, 1)) << "1/3 rounds through a half";
      std::uint64_t pushed = 0, pulled = 0;
      for (const ShardTraffic& t : clients[w]->traffic()) {
        pushed += t.bytes_pushed;
        pulled += t.bytes_pulled;
        EXPECT_EQ(2 * t.bytes_pushed, t.bytes_pulled) << "each shard: halves out, floats in";
      }
      EXPECT_EQ(pushed, kCount * 2u);
      EXPECT_EQ(pulled, kCount * sizeof(float));
    }
  }
}

// The SPARSE push encoding: each worker pushes only its non-zero elements,
// 8 bytes each, chunk by chunk over several chunks per shard; the shards sum
// them as the dense gradients they stand for; pulls stay float32.
TEST_P(PsClientTest, SparsePushMovesEightBytesPerNonZeroAndTheShardsSumTheDenseGradients) {
  constexpr std::int64_t kCount = 2 * (PsClient::kChunkBytes / sizeof(float)) + 4321;
  constexpr std::uint32_t kWorkers = 2;
  const auto gradient = [](std::uint32_t w, std::int64_t i) {
    return i % (w == 0 ? 10 : 7) == 0 ? static_cast<float>(i % 1000 + w) : 0.0f;
  };
  std::int64_t non_zeros[kWorkers] = {0, 0};
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    for (std::int64_t i = 0; i < kCount; ++i) non_zeros[w] += gradient(w, i) != 0.0f;
  }
  proto::TensorSpec spec = Tensor(kCount, kWorkers, proto::Optimizer::NONE);
  spec.set_push_encoding(proto::TensorSpec::SPARSE);
  std::vector<std::unique_ptr<PsClient>> clients;
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    clients.push_back(Client());
    ASSERT_TRUE(clients.back()->Declare(spec).ok());
  }
  std::vector<std::vector<float>> result(kWorkers, std::vector<float>(kCount));
  std::vector<absl::Status> status(kWorkers);
  std::vector<std::thread> threads;
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      for (std::int64_t i = 0; i < kCount; ++i) result[w][i] = gradient(w, i);
      status[w] = clients[w]->PushPull("t", w, 1, Bytes(result[w]));
    });
  }
  for (std::thread& t : threads) t.join();
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(status[w].ok()) << status[w];
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < kCount; ++i) {
      wrong += result[w][i] != gradient(0, i) + gradient(1, i);
    }
    EXPECT_EQ(wrong, 0) << "worker " << w;
    std::uint64_t pushed = 0, pulled = 0;
    for (const ShardTraffic& t : clients[w]->traffic()) {
      pushed += t.bytes_pushed;
      pulled += t.bytes_pulled;
    }
    EXPECT_EQ(pushed, static_cast<std::uint64_t>(non_zeros[w]) * 8);
    EXPECT_EQ(pulled, kCount * sizeof(float));
  }
}

// The shards refuse the FP16 push encoding for tensors that are not float32,
// naming the tensor and its dtype.
TEST_P(PsClientTest, Fp16PushEncodingOfAnInt32TensorIsRefusedByName) {
  proto::TensorSpec spec = Tensor(10, 1, proto::Optimizer::NONE);
  spec.set_name("counts");
  spec.set_dtype(proto::Dtype::int32);
  spec.set_push_encoding(proto::TensorSpec::FP16);
  const absl::Status refused = Client()->Declare(spec);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("'counts'"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("int32"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("FP16"), std::string::npos) << refused;
  spec.set_push_encoding(proto::TensorSpec::DENSE);
  EXPECT_TRUE(Client()->Declare(spec).ok()) << "dense int32 is fine";
}

INSTANTIATE_TEST_SUITE_P(Shards, PsClientTest, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return "S" + std::to_string(info.param); });

proto::TensorSpec TenFloatsOfOneWorker() {
  proto::TensorSpec tensor;
  tensor.set_name("t");
  tensor.set_count(10);
  tensor.set_dtype(proto::Dtype::float32);
  tensor.set_workers(1);
  return tensor;
}

// A worker may dial a shard that is not listening yet (a compose service
// still starting, a connect refused once under load): the first call waits
// through the refused attempts instead of failing on the first one.
TEST(PsClientConnectTest, DeclareWaitsForAShardThatIsStillStarting) {
  const int port = testing::FreePort();
  PsClient client({"127.0.0.1:" + std::to_string(port)}, kCredentials, std::chrono::seconds(20));
  std::unique_ptr<InProcessShard> shard;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    absl::StatusOr<std::unique_ptr<InProcessShard>> started =
        InProcessShard::Start(kCredentials, std::chrono::seconds(10), port);
    ASSERT_TRUE(started.ok()) << started.status();
    shard = *std::move(started);
  });
  const absl::Status declared = client.Declare(TenFloatsOfOneWorker());
  late.join();
  EXPECT_TRUE(declared.ok()) << declared;
}

TEST(PsClientConnectTest, AShardThatNeverListensIsNamedWithTheLastConnectError) {
  const std::string address = "127.0.0.1:" + std::to_string(testing::FreePort());
  PsClient client({address}, kCredentials, std::chrono::milliseconds(1200));
  const absl::Status declared = client.Declare(TenFloatsOfOneWorker());
  EXPECT_EQ(declared.code(), absl::StatusCode::kUnavailable) << declared;
  EXPECT_NE(declared.message().find("parameter server shard 0 at " + address +
                                    ": no connection within 1200 ms: "),
            std::string::npos)
      << declared;
}

// End to end over a real channel: a PsClient worker and a worker that pushes
// its second chunk only after it got the values of its first. A shard that
// waited for whole pushes would serve neither (the second worker's read
// fails at its deadline); full duplex serves chunk 0 at once.
TEST(PsClientDuplexTest, AWorkerGetsChunkZeroBeforeItPushesChunkOne) {
  absl::StatusOr<std::unique_ptr<InProcessShard>> shard =
      InProcessShard::Start(kCredentials, std::chrono::seconds(10));
  ASSERT_TRUE(shard.ok()) << shard.status();
  constexpr std::int64_t kChunk = ParameterStore::kDefaultChunkBytes / sizeof(float);
  PsClient client({(*shard)->address()}, kCredentials, std::chrono::seconds(20));
  proto::TensorSpec tensor;
  tensor.set_name("t");
  tensor.set_count(2 * kChunk);
  tensor.set_dtype(proto::Dtype::float32);
  tensor.set_workers(2);
  ASSERT_TRUE(client.Declare(tensor).ok());
  std::vector<float> mine(2 * kChunk);
  for (std::int64_t i = 0; i < 2 * kChunk; ++i) mine[i] = static_cast<float>(i % 5);
  absl::Status mine_status;
  // Joined however the test ends: a failed assertion below must not leave it running.
  std::jthread worker0([&] {
    mine_status = client.PushPull("t", 0, 1, std::as_writable_bytes(std::span<float>(mine)));
  });

  auto stub = proto::ParameterServer::NewStub(
      grpc::CreateChannel((*shard)->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  AttachCredentials(kCredentials, context);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->PushPull(&context);
  const auto push = [&](std::int64_t offset) {
    proto::PushChunk chunk;
    chunk.set_tensor("t");
    chunk.set_worker(1);
    chunk.set_step(1);
    chunk.set_offset(offset);
    std::vector<float> g(kChunk, 10.0f);
    chunk.set_data(std::string(reinterpret_cast<const char*>(g.data()), g.size() * 4));
    return stream->Write(chunk);
  };
  const auto expect_values = [&](std::int64_t offset) {
    proto::ValueChunk value;
    ASSERT_TRUE(stream->Read(&value)) << "no values of the chunk at " << offset;
    ASSERT_EQ(value.offset(), offset);
    ASSERT_EQ(value.data().size(), static_cast<std::size_t>(kChunk) * 4);
    float first;
    std::memcpy(&first, value.data().data(), 4);
    EXPECT_EQ(first, static_cast<float>(offset % 5 + 10));
  };
  ASSERT_TRUE(push(0));
  expect_values(0);
  ASSERT_TRUE(push(kChunk));
  stream->WritesDone();
  expect_values(kChunk);
  proto::ValueChunk none;
  EXPECT_FALSE(stream->Read(&none));
  const grpc::Status finished = stream->Finish();
  EXPECT_TRUE(finished.ok()) << finished.error_message();
  worker0.join();
  ASSERT_TRUE(mine_status.ok()) << mine_status;
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < 2 * kChunk; ++i) wrong += mine[i] != static_cast<float>(i % 5 + 10);
  EXPECT_EQ(wrong, 0);
}

// A shard that sends a whole slice's worth of values once it has the first
// pushed chunk, and reads the rest of the push only after: its writes wait
// for the client to read (gRPC's flow control), so a client that wrote its
// whole push before reading anything would stall both sides until the
// deadline. The values all belong to chunk 0, which it has received, so the
// client overwrites only pushed bytes; 64 copies make up the slice's bytes.
class ValuesFirstShard final : public proto::ParameterServer::Service {
 public:
  static constexpr std::int64_t kChunk = PsClient::kChunkBytes / sizeof(float);
  static constexpr int kChunks = 64;

  grpc::Status Declare(grpc::ServerContext*, const proto::DeclareRequest* request,
                       proto::DeclareReply* reply) override {
    reply->set_offset(0);
    reply->set_count(request->tensor().count());
    return grpc::Status::OK;
  }
  grpc::Status PushPull(grpc::ServerContext*,
                        grpc::ServerReaderWriter<proto::ValueChunk, proto::PushChunk>* stream)
      override {
    proto::PushChunk chunk;
    if (!stream->Read(&chunk) || chunk.offset() != 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no first chunk");
    }
    std::size_t received = chunk.data().size();
    proto::ValueChunk value;
    value.set_offset(0);
    const std::vector<float> sevens(kChunk, 7.0f);
    value.set_data(std::string(reinterpret_cast<const char*>(sevens.data()), kChunk * 4));
    for (int c = 0; c < kChunks; ++c) {
      if (!stream->Write(value)) return grpc::Status(grpc::StatusCode::ABORTED, "gone");
    }
    while (stream->Read(&chunk)) received += chunk.data().size();
    if (received != static_cast<std::size_t>(kChunks * kChunk * 4)) {
      return grpc::Status(grpc::StatusCode::DATA_LOSS, "the push was short");
    }
    return grpc::Status::OK;
  }
};

// The client reads the values while it still writes its push.
TEST(PsClientDuplexTest, TheClientReadsValuesWhileItStillPushes) {
  ValuesFirstShard shard;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&shard);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(port, 0);
  PsClient client({"127.0.0.1:" + std::to_string(port)}, kCredentials, std::chrono::seconds(5));
  proto::TensorSpec tensor;
  tensor.set_name("t");
  tensor.set_count(ValuesFirstShard::kChunks * ValuesFirstShard::kChunk);
  tensor.set_dtype(proto::Dtype::float32);
  tensor.set_workers(1);
  ASSERT_TRUE(client.Declare(tensor).ok());
  std::vector<float> data(tensor.count(), 1.0f);
  const absl::Status st =
      client.PushPull("t", 0, 1, std::as_writable_bytes(std::span<float>(data)));
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(data[0], 7.0f);
  EXPECT_EQ(data[ValuesFirstShard::kChunk - 1], 7.0f);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

}  // namespace
}  // namespace testbed
