// Every method of the parameter server's gRPC service through a real channel,
// with clients generated from parameter_server.proto (what any other language
// would use): no credentials, wrong credentials and the right ones. The
// service swaps generated handlers for raw-message ones, so only a call over
// the wire shows that each method still reads its request and answers in the
// proto's format, and that the daemon survives whatever a caller sends.
#include <gtest/gtest.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "proto/chunk_wire.h"
#include "proto/parameter_server.grpc.pb.h"
#include "common/byte_size.h"
#include "server/parameter_server_service.h"

namespace testbed {
namespace {

const Credentials kRight{"job-1", "secret"};
const Credentials kWrongToken{"job-1", "guess"};
const Credentials kWrongJob{"job-2", "secret"};

std::string FloatBytes(const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

class ParameterServerServiceTest : public ::testing::Test {
 public:
  void SetUp() override {
    service_ = std::make_unique<ParameterServerService>(store_, kRight, std::chrono::seconds(5),
                                                        calls_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials());
    stub_ = proto::ParameterServer::NewStub(channel_);
  }
  void TearDown() override {
    store_.Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  // A context with a deadline and, unless null, `credentials`.
  static std::unique_ptr<grpc::ClientContext> Context(const Credentials* credentials) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (credentials != nullptr) AttachCredentials(*credentials, *context);
    return context;
  }

  grpc::Status Declare(const Credentials* credentials, const std::string& name,
                       std::int64_t count, int workers) {
    proto::DeclareRequest request;
    request.mutable_tensor()->set_name(name);
    request.mutable_tensor()->set_count(count);
    request.mutable_tensor()->set_dtype(proto::Dtype::float32);
    request.mutable_tensor()->set_workers(workers);
    request.set_shards(1);
    request.set_shard(0);
    proto::DeclareReply reply;
    return stub_->Declare(Context(credentials).get(), request, &reply);
  }

  grpc::Status Push(const Credentials* credentials, const std::string& name, int worker,
                    std::uint64_t step, const std::vector<float>& gradient) {
    auto context = Context(credentials);
    proto::PushReply reply;
    auto writer = stub_->Push(context.get(), &reply);
    proto::PushChunk chunk;
    chunk.set_tensor(name);
    chunk.set_worker(worker);
    chunk.set_step(step);
    chunk.set_offset(0);
    chunk.set_data(FloatBytes(gradient));
    writer->Write(chunk);
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    if (status.ok()) {
      EXPECT_EQ(reply.step(), step);
    }
    return status;
  }

  // The values of `step`, concatenated in offset order.
  grpc::Status Pull(const Credentials* credentials, const std::string& name, std::uint64_t step,
                    std::vector<float>* values) {
    auto context = Context(credentials);
    proto::PullRequest request;
    request.set_tensor(name);
    request.set_step(step);
    auto reader = stub_->Pull(context.get(), request);
    proto::ValueChunk chunk;
    std::string bytes;
    while (reader->Read(&chunk)) {
      EXPECT_EQ(chunk.offset() * static_cast<std::int64_t>(sizeof(float)),
                static_cast<std::int64_t>(bytes.size()));
      bytes += chunk.data();
    }
    if (values != nullptr) *values = Floats(bytes);
    return reader->Finish();
  }

  grpc::Status PushPull(const Credentials* credentials, const std::string& name, int worker,
                        std::uint64_t step, const std::vector<float>& gradient,
                        std::vector<float>* values) {
    auto context = Context(credentials);
    auto stream = stub_->PushPull(context.get());
    proto::PushChunk chunk;
    chunk.set_tensor(name);
    chunk.set_worker(worker);
    chunk.set_step(step);
    chunk.set_offset(0);
    chunk.set_data(FloatBytes(gradient));
    stream->Write(chunk);
    stream->WritesDone();
    proto::ValueChunk value;
    std::string bytes;
    while (stream->Read(&value)) bytes += value.data();
    if (values != nullptr) *values = Floats(bytes);
    return stream->Finish();
  }

  grpc::Status Stats(const Credentials* credentials, proto::StatsReply* reply) {
    return stub_->Stats(Context(credentials).get(), proto::StatsRequest(), reply);
  }

  grpc::Status Forget(const Credentials* credentials, const std::string& name) {
    proto::ForgetRequest request;
    request.set_tensor(name);
    proto::ForgetReply reply;
    return stub_->Forget(Context(credentials).get(), request, &reply);
  }

  static constexpr int kMaxCalls = 8;
  ParameterStore store_;
  std::shared_ptr<CallLimiter> calls_ = std::make_shared<CallLimiter>(kMaxCalls);
  std::unique_ptr<ParameterServerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
};

// Each method, called with the given credentials.
std::vector<std::pair<std::string, std::function<grpc::Status(ParameterServerServiceTest&,
                                                               const Credentials*)>>>
EveryMethod() {
  return {
      {"Declare", [](auto& t, auto* c) { return t.Declare(c, "w", 4, 1); }},
      {"Push", [](auto& t, auto* c) { return t.Push(c, "w", 0, 1, {1, 2, 3, 4}); }},
      {"Pull", [](auto& t, auto* c) { return t.Pull(c, "w", 1, nullptr); }},
      {"PushPull",
       [](auto& t, auto* c) { return t.PushPull(c, "w", 0, 1, {1, 2, 3, 4}, nullptr); }},
      {"Stats",
       [](auto& t, auto* c) {
         proto::StatsReply reply;
         return t.Stats(c, &reply);
       }},
      {"Forget", [](auto& t, auto* c) { return t.Forget(c, "w"); }},
  };
}

TEST_F(ParameterServerServiceTest, EveryMethodRefusesMissingAndWrongCredentialsAndStaysUp) {
  ASSERT_TRUE(Declare(&kRight, "w", 4, 1).ok());
  for (const auto& [name, call] : EveryMethod()) {
    SCOPED_TRACE(name);
    EXPECT_EQ(call(*this, nullptr).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(call(*this, &kWrongToken).error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(call(*this, &kWrongJob).error_code(), grpc::StatusCode::PERMISSION_DENIED);
    // The server is still there, and nothing refused reached the store.
    proto::StatsReply stats;
    ASSERT_TRUE(Stats(&kRight, &stats).ok());
    EXPECT_EQ(stats.bytes_received(), 0u);
    EXPECT_EQ(stats.bytes_sent(), 0u);
  }
}

TEST_F(ParameterServerServiceTest, PushThenPullServesTheSumOfEveryWorkersGradient) {
  ASSERT_TRUE(Declare(&kRight, "w", 3, 2).ok());
  ASSERT_TRUE(Push(&kRight, "w", 0, 1, {1, 2, 3}).ok());
  ASSERT_TRUE(Push(&kRight, "w", 1, 1, {10, 20, 30}).ok());
  std::vector<float> values;
  const grpc::Status status = Pull(&kRight, "w", 1, &values);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(values, (std::vector<float>{11, 22, 33}));
  proto::StatsReply stats;
  ASSERT_TRUE(Stats(&kRight, &stats).ok());
  EXPECT_EQ(stats.bytes_received(), 2 * 3 * sizeof(float));
  EXPECT_EQ(stats.bytes_sent(), 3 * sizeof(float));
}

TEST_F(ParameterServerServiceTest, PushPullFromEveryWorkerGetsTheSum) {
  ASSERT_TRUE(Declare(&kRight, "w", 2, 2).ok());
  std::vector<float> first;
  std::thread worker0([&] { EXPECT_TRUE(PushPull(&kRight, "w", 0, 1, {1, 2}, &first).ok()); });
  std::vector<float> second;
  const grpc::Status status = PushPull(&kRight, "w", 1, 1, {3, 4}, &second);
  worker0.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(first, (std::vector<float>{4, 6}));
  EXPECT_EQ(second, (std::vector<float>{4, 6}));
}

// One worker's PushPull stream, driven a chunk at a time.
struct DuplexWorker {
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReaderWriter<proto::PushChunk, proto::ValueChunk>> stream;

  bool Write(const std::string& tensor, int worker, std::int64_t offset,
             const std::vector<float>& data) {
    proto::PushChunk chunk;
    chunk.set_tensor(tensor);
    chunk.set_worker(worker);
    chunk.set_step(1);
    chunk.set_offset(offset);
    chunk.set_data(FloatBytes(data));
    return stream->Write(chunk);
  }
};

// Full duplex over a real channel: each worker gets the values of the first
// chunk while the second is not yet pushed (a shard that read whole pushes
// first would answer neither, and the reads would fail at the deadline).
TEST_F(ParameterServerServiceTest, PushPullServesAChunkWhileThePushesAreStillUnderWay) {
  constexpr std::int64_t kChunk = ParameterStore::kDefaultChunkBytes / sizeof(float);
  ASSERT_TRUE(Declare(&kRight, "w", 2 * kChunk, 2).ok());
  const auto part = [](int worker, std::int64_t from) {
    std::vector<float> g(kChunk);
    for (std::int64_t i = 0; i < kChunk; ++i) {
      g[i] = static_cast<float>(worker * 10 + (from + i) % 7);
    }
    return g;
  };
  std::vector<DuplexWorker> workers(2);
  for (int w = 0; w < 2; ++w) {
    workers[w].context = Context(&kRight);
    workers[w].stream = stub_->PushPull(workers[w].context.get());
    ASSERT_TRUE(workers[w].Write("w", w, 0, part(w, 0)));
  }
  for (int w = 0; w < 2; ++w) {
    proto::ValueChunk value;
    ASSERT_TRUE(workers[w].stream->Read(&value));
    EXPECT_EQ(value.offset(), 0);
    const std::vector<float> got = Floats(value.data());
    ASSERT_EQ(got.size(), static_cast<std::size_t>(kChunk));
    int wrong = 0;
    for (std::int64_t i = 0; i < kChunk; ++i) {
      wrong += got[i] != static_cast<float>(10 + 2 * (i % 7));
    }
    EXPECT_EQ(wrong, 0);
  }
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(workers[w].Write("", w, kChunk, part(w, kChunk)));
    workers[w].stream->WritesDone();
  }
  for (int w = 0; w < 2; ++w) {
    proto::ValueChunk value;
    ASSERT_TRUE(workers[w].stream->Read(&value));
    EXPECT_EQ(value.offset(), kChunk);
    EXPECT_EQ(Floats(value.data())[1], static_cast<float>(10 + 2 * ((kChunk + 1) % 7)));
    EXPECT_FALSE(workers[w].stream->Read(&value));
    const grpc::Status status = workers[w].stream->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
}

// A push that breaks off after its step began to be served fails the other
// workers' PushPull with the reason, not with partial values or a hang.
TEST_F(ParameterServerServiceTest, APushThatBreaksOffFailsTheOthersPushPullNamingIt) {
  constexpr std::int64_t kChunk = ParameterStore::kDefaultChunkBytes / sizeof(float);
  ASSERT_TRUE(Declare(&kRight, "w", 2 * kChunk, 2).ok());
  std::vector<DuplexWorker> workers(2);
  for (int w = 0; w < 2; ++w) {
    workers[w].context = Context(&kRight);
    workers[w].stream = stub_->PushPull(workers[w].context.get());
    ASSERT_TRUE(workers[w].Write("w", w, 0, std::vector<float>(kChunk, 1.0f)));
  }
  proto::ValueChunk value;
  ASSERT_TRUE(workers[0].stream->Read(&value));  // the step is served
  workers[1].Write("", 1, 5, {1.0f});            // out of order
  workers[1].stream->WritesDone();
  while (workers[1].stream->Read(&value)) EXPECT_NE(value.offset(), kChunk);
  EXPECT_EQ(workers[1].stream->Finish().error_code(), grpc::StatusCode::OUT_OF_RANGE);
  workers[0].Write("", 0, kChunk, std::vector<float>(kChunk, 1.0f));
  workers[0].stream->WritesDone();
  while (workers[0].stream->Read(&value)) EXPECT_NE(value.offset(), kChunk);
  const grpc::Status status = workers[0].stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_NE(status.error_message().find("worker 1's push broke off"), std::string::npos)
      << status.error_message();
}

// TensorSpec.push_encoding FP16: a push's data is halves (2 bytes an
// element, through the generated stub here, as any client would send them);
// the shard sums their float32 values, serves float32, and counts the bytes
// that travelled. Small integers are exact in half; a third is rounded.
TEST_F(ParameterServerServiceTest, Fp16PushesAreHalvesAndTheShardSumsTheirValues) {
  const auto declare = [&](const std::string& name, proto::Dtype::Kind dtype,
                           proto::TensorSpec::PushEncoding encoding) {
    proto::DeclareRequest request;
    request.mutable_tensor()->set_name(name);
    request.mutable_tensor()->set_count(3);
    request.mutable_tensor()->set_dtype(dtype);
    request.mutable_tensor()->set_workers(2);
    request.mutable_tensor()->set_push_encoding(encoding);
    request.set_shards(1);
    request.set_shard(0);
    proto::DeclareReply reply;
    return stub_->Declare(Context(&kRight).get(), request, &reply);
  };
  const auto push = [&](int worker, const std::string& data) {
    auto context = Context(&kRight);
    proto::PushReply reply;
    auto writer = stub_->Push(context.get(), &reply);
    proto::PushChunk chunk;
    chunk.set_tensor("h");
    chunk.set_worker(worker);
    chunk.set_step(1);
    chunk.set_data(data);
    writer->Write(chunk);
    writer->WritesDone();
    return writer->Finish();
  };
  const auto halves = [](const std::vector<float>& values) {
    std::string bytes(2 * values.size(), '\0');
    EncodeHalves(values, reinterpret_cast<std::byte*>(bytes.data()));
    return bytes;
  };
  for (const proto::Dtype::Kind dtype : {proto::Dtype::int32, proto::Dtype::float64}) {
    for (const auto encoding : {proto::TensorSpec::FP16, proto::TensorSpec::SPARSE}) {
      const grpc::Status refused = declare("h", dtype, encoding);
      EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_NE(refused.error_message().find("tensor 'h'"), std::string::npos)
          << refused.error_message();
      EXPECT_NE(refused.error_message().find(proto::Dtype::Kind_Name(dtype)), std::string::npos)
          << refused.error_message();
      EXPECT_NE(refused.error_message().find(proto::TensorSpec::PushEncoding_Name(encoding)),
                std::string::npos)
          << refused.error_message();
    }
  }
  ASSERT_TRUE(declare("h", proto::Dtype::float32, proto::TensorSpec::FP16).ok());
  EXPECT_EQ(declare("h", proto::Dtype::float32, proto::TensorSpec::DENSE).error_code(),
            grpc::StatusCode::ALREADY_EXISTS)
      << "the encoding is part of the declaration";
  EXPECT_EQ(push(0, std::string(5, '\0')).error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << "an odd byte count is not whole halves";
  ASSERT_TRUE(push(0, halves({1, 2, 3})).ok());
  ASSERT_TRUE(push(1, halves({10, 20, 1.0f / 3})).ok());
  std::vector<float> values;
  ASSERT_TRUE(Pull(&kRight, "h", 1, &values).ok());
  const float third = HalfToFloat(FloatToHalf(1.0f / 3));
  EXPECT_NE(third, 1.0f / 3);
  EXPECT_EQ(values, (std::vector<float>{11, 22, 3 + third}));
  proto::StatsReply stats;
  ASSERT_TRUE(Stats(&kRight, &stats).ok());
  EXPECT_EQ(stats.bytes_received(), 2 * 3 * 2u) << "the halves that travelled";
  EXPECT_EQ(stats.bytes_sent(), 3 * sizeof(float));
  // Forgotten, the name takes a dense declaration and float32 pushes again.
  ASSERT_TRUE(Forget(&kRight, "h").ok());
  ASSERT_TRUE(declare("h", proto::Dtype::float32, proto::TensorSpec::DENSE).ok());
  ASSERT_TRUE(push(0, FloatBytes({1, 2, 3})).ok());
  ASSERT_TRUE(push(1, FloatBytes({1, 1, 1})).ok());
  ASSERT_TRUE(Pull(&kRight, "h", 1, &values).ok());
  EXPECT_EQ(values, (std::vector<float>{2, 3, 4}));
}

// TensorSpec.push_encoding SPARSE: a push's data is (index, value) pairs of
// the chunk's non-zeros, PushChunk.count the elements it covers; the shard
// scatters them into zeros and counts the pairs' bytes. A chunk claiming
// more elements than the limit, or pairs outside it, fails the push.
TEST_F(ParameterServerServiceTest, SparsePushesArePairsScatteredIntoZeros) {
  proto::DeclareRequest request;
  request.mutable_tensor()->set_name("s");
  request.mutable_tensor()->set_count(6);
  request.mutable_tensor()->set_dtype(proto::Dtype::float32);
  request.mutable_tensor()->set_workers(2);
  request.mutable_tensor()->set_push_encoding(proto::TensorSpec::SPARSE);
  request.set_shards(1);
  request.set_shard(0);
  proto::DeclareReply declared;
  ASSERT_TRUE(stub_->Declare(Context(&kRight).get(), request, &declared).ok());
  const auto push = [&](int worker, std::int64_t count, const std::vector<float>& dense) {
    std::vector<std::byte> pairs;
    EncodeNonZeros(dense, &pairs);
    auto context = Context(&kRight);
    proto::PushReply reply;
    auto writer = stub_->Push(context.get(), &reply);
    proto::PushChunk chunk;
    chunk.set_tensor("s");
    chunk.set_worker(worker);
    chunk.set_step(1);
    chunk.set_count(count);
    chunk.set_data(std::string(reinterpret_cast<const char*>(pairs.data()), pairs.size()));
    writer->Write(chunk);
    writer->WritesDone();
    return writer->Finish();
  };
  EXPECT_EQ(push(0, kMaxSparseChunkElements + 1, {1}).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(push(0, 2, {0, 0, 5}).error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << "a pair outside the chunk's elements";
  ASSERT_TRUE(push(0, 6, {0, 2, 0, 0, 0, -1}).ok());
  ASSERT_TRUE(push(1, 6, {7, 0, 0, 0, 0, 0}).ok());
  std::vector<float> values;
  ASSERT_TRUE(Pull(&kRight, "s", 1, &values).ok());
  EXPECT_EQ(values, (std::vector<float>{7, 2, 0, 0, 0, -1}));
  proto::StatsReply stats;
  ASSERT_TRUE(Stats(&kRight, &stats).ok());
  EXPECT_EQ(stats.bytes_received(), 3 * kSparsePairBytes) << "the pairs that travelled";
}

TEST_F(ParameterServerServiceTest, AnIncompleteStepTimesOutAndAnUnknownTensorIsNotFound) {
  ASSERT_TRUE(Declare(&kRight, "w", 2, 2).ok());
  ASSERT_TRUE(Push(&kRight, "w", 0, 1, {1, 2}).ok());
  auto context = Context(&kRight);
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  proto::PullRequest request;
  request.set_tensor("w");
  request.set_step(1);
  auto reader = stub_->Pull(context.get(), request);
  proto::ValueChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(Pull(&kRight, "nothing", 1, nullptr).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ParameterServerServiceTest, ForgetFreesTheTensor) {
  ASSERT_TRUE(Declare(&kRight, "w", 2, 1).ok());
  ASSERT_TRUE(Push(&kRight, "w", 0, 1, {1, 2}).ok());
  ASSERT_TRUE(Forget(&kRight, "w").ok());
  EXPECT_EQ(Pull(&kRight, "w", 1, nullptr).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Push(&kRight, "w", 0, 2, {1, 2}).error_code(), grpc::StatusCode::NOT_FOUND);
  // The name is free again, for a different declaration.
  EXPECT_TRUE(Declare(&kRight, "w", 5, 1).ok());
}

TEST_F(ParameterServerServiceTest, APullThatSendsNoRequestIsRefusedNotACrash) {
  // A client that opens Pull and closes its side without a request: the
  // handler must not serve (or dereference) a request that never came.
  grpc::GenericStub generic(channel_);
  auto context = Context(&kRight);
  grpc::CompletionQueue queue;
  auto call = generic.PrepareCall(context.get(), "/testbed.proto.ParameterServer/Pull", &queue);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(queue.Next(&tag, &ok));
  ASSERT_TRUE(ok);
  call->WritesDone(reinterpret_cast<void*>(2));
  ASSERT_TRUE(queue.Next(&tag, &ok));
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(3));
  ASSERT_TRUE(queue.Next(&tag, &ok));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  proto::StatsReply stats;
  EXPECT_TRUE(Stats(&kRight, &stats).ok());
}

// Declarations beyond memory used to throw inside the handler (gRPC answered
// UNKNOWN: "Unexpected error in RPC handling"); now they are refused with the
// limit and the flag that raises it, and the shard keeps serving.
TEST_F(ParameterServerServiceTest, HugeDeclarationsAreRefusedNamingTheLimitAndTheShardStaysUp) {
  const std::string limit =
      "exceeds this shard's limit of " +
      HumanByteSize(static_cast<double>(store_.max_tensor_bytes())) +
      " per tensor (testbed-server --max-tensor-bytes)";
  for (const std::int64_t count : {std::int64_t{1} << 40, std::int64_t{1} << 62}) {
    SCOPED_TRACE(count);
    const grpc::Status status = Declare(&kRight, "huge", count, 1);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
    EXPECT_NE(status.error_message().find(limit), std::string::npos) << status.error_message();
    EXPECT_EQ(status.error_message().find('\n'), std::string::npos) << status.error_message();
    proto::StatsReply stats;
    ASSERT_TRUE(Stats(&kRight, &stats).ok());
  }
  EXPECT_EQ(Declare(&kRight, "negative", -1, 1).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The shard still serves tensors it can hold.
  ASSERT_TRUE(Declare(&kRight, "w", 2, 1).ok());
  ASSERT_TRUE(Push(&kRight, "w", 0, 1, {1, 2}).ok());
  std::vector<float> values;
  ASSERT_TRUE(Pull(&kRight, "w", 1, &values).ok());
  EXPECT_EQ(values, (std::vector<float>{1, 2}));
}

// Streams held open (pulls waiting on a step that never completes) take the
// server's places for calls; one more call is refused at once, naming the
// limit and its flag, and a place comes back as soon as a stream ends.
TEST_F(ParameterServerServiceTest, CallsBeyondTheLimitAreRefusedUntilOthersEnd) {
  ASSERT_TRUE(Declare(&kRight, "w", 2, 2).ok());
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<proto::ValueChunk>>> stalled;
  proto::PullRequest request;
  request.set_tensor("w");
  request.set_step(1);  // never pushed: every pull waits
  for (int i = 0; i < kMaxCalls; ++i) {
    contexts.push_back(Context(&kRight));
    stalled.push_back(stub_->Pull(contexts.back().get(), request));
  }
  // The pulls are admitted on the server's threads: wait until all are.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (calls_->in_progress() < kMaxCalls && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(calls_->in_progress(), kMaxCalls);
  proto::StatsReply stats;
  const grpc::Status refused = Stats(&kRight, &stats);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(refused.error_message(),
            "this server already serves 8 calls at once, its limit (testbed-server --max-calls)");
  // Unauthenticated callers are refused for their credentials, not counted.
  EXPECT_EQ(Stats(nullptr, &stats).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  contexts.front()->TryCancel();
  EXPECT_EQ(stalled.front()->Finish().error_code(), grpc::StatusCode::CANCELLED);
  const auto freed_by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (calls_->in_progress() == kMaxCalls && std::chrono::steady_clock::now() < freed_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(Stats(&kRight, &stats).ok());
  for (std::size_t i = 1; i < contexts.size(); ++i) {
    contexts[i]->TryCancel();
    stalled[i]->Finish().IgnoreError();
  }
}

}  // namespace
}  // namespace testbed
