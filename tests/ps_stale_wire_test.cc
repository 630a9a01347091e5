// The stale modes over the wire: PsClient's PushPull against shards served on
// loopback (the store's rules are proved in parameter_store_stale_test.cc).
// The service names the puller, so a PushPull gets its own push in what it
// pulls and waits for no one else (async), or for the slowest to come within
// k steps (SSP); a worker whose push stream breaks off ends the others' waits
// with an error naming it.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <vector>

#include <grpcpp/create_channel.h>

#include "proto/credentials.h"
#include "proto/parameter_server.grpc.pb.h"
#include "server/in_process_shard.h"
#include "worker/ps_client.h"

namespace testbed {
namespace {

using namespace std::chrono_literals;

class PsStaleWireTest : public ::testing::Test {
 protected:
  void Start(int shards) {
    for (int s = 0; s < shards; ++s) {
      absl::StatusOr<std::unique_ptr<InProcessShard>> shard =
          InProcessShard::Start(kCredentials, std::chrono::seconds(60));
      ASSERT_TRUE(shard.ok()) << shard.status();
      addresses_.push_back((*shard)->address());
      shards_.push_back(*std::move(shard));
    }
  }
  std::unique_ptr<PsClient> Client() {
    return std::make_unique<PsClient>(addresses_, kCredentials, std::chrono::seconds(60));
  }
  static proto::TensorSpec Spec(proto::TensorSpec::Consistency consistency,
                                std::uint32_t staleness) {
    proto::TensorSpec spec;
    spec.set_name("w");
    spec.set_count(5);
    spec.set_dtype(proto::Dtype::float32);
    spec.set_workers(2);
    spec.mutable_optimizer()->set_kind(proto::Optimizer::SGD);
    spec.mutable_optimizer()->set_learning_rate(0.5);
    spec.mutable_optimizer()->set_average(true);
    spec.set_consistency(consistency);
    spec.set_staleness(staleness);
    return spec;
  }
  // Worker `worker`'s PushPull of `step` with `gradient`; the values, or the error.
  static absl::StatusOr<std::vector<float>> Step(PsClient& client, std::uint32_t worker,
                                                 std::uint64_t step, std::vector<float> gradient) {
    absl::Status st =
        client.PushPull("w", worker, step, std::as_writable_bytes(std::span(gradient)));
    if (!st.ok()) return st;
    return gradient;
  }

  const Credentials kCredentials{"stale", "secret"};
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<InProcessShard>> shards_;
};

std::vector<float> Times(float factor, const std::vector<float>& v) {
  std::vector<float> out;
  for (float x : v) out.push_back(factor * x);
  return out;
}

// Two shards split the 5 elements; worker 1 never pushes.
TEST_F(PsStaleWireTest, AsynchronousPushPullGetsItsOwnPushAndWaitsForNoOneElse) {
  Start(2);
  std::unique_ptr<PsClient> client = Client();
  ASSERT_TRUE(client->Declare(Spec(proto::TensorSpec::ASYNCHRONOUS, 0)).ok());
  const std::vector<float> g1 = {2, 4, 6, 8, 10}, g2 = {-4, 0, 4, 8, 12};
  absl::StatusOr<std::vector<float>> values = Step(*client, 0, 1, g1);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, Times(-0.25f, g1));
  values = Step(*client, 0, 2, g2);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<float>{0.5f, -1, -2.5f, -4, -5.5f}));
}

TEST_F(PsStaleWireTest, SspHoldsAPushPullUntilTheSlowestIsWithinKSteps) {
  Start(1);
  std::unique_ptr<PsClient> fast = Client(), slow = Client();
  ASSERT_TRUE(fast->Declare(Spec(proto::TensorSpec::BOUNDED_STALENESS, 1)).ok());
  ASSERT_TRUE(slow->Declare(Spec(proto::TensorSpec::BOUNDED_STALENESS, 1)).ok());
  const std::vector<float> g = {4, 4, 4, 4, 4};
  ASSERT_TRUE(Step(*fast, 0, 1, g).ok());  // step 1 - k = 0: no wait
  auto second = std::async(std::launch::async, [&] { return Step(*fast, 0, 2, g); });
  EXPECT_EQ(second.wait_for(100ms), std::future_status::timeout)
      << "worker 0 ran 2 steps ahead of worker 1 with k = 1";
  absl::StatusOr<std::vector<float>> slow_values = Step(*slow, 1, 1, g);
  ASSERT_TRUE(slow_values.ok()) << slow_values.status();
  ASSERT_EQ(second.wait_for(30s), std::future_status::ready);
  absl::StatusOr<std::vector<float>> values = second.get();
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, std::vector<float>(5, -3.0f));  // three pushes of 4, each -0.25 * 4
}

// Worker 1's push stream carries two of five elements and is cancelled:
// worker 0, waiting (k = 0) for worker 1's step 1, gets ABORTED naming it.
TEST_F(PsStaleWireTest, APushStreamThatBreaksOffEndsTheOthersWaitNamingItsWorker) {
  Start(1);
  std::unique_ptr<PsClient> client = Client();
  ASSERT_TRUE(client->Declare(Spec(proto::TensorSpec::BOUNDED_STALENESS, 0)).ok());
  auto waiting = std::async(std::launch::async,
                            [&] { return Step(*client, 0, 1, {1, 1, 1, 1, 1}); });
  EXPECT_EQ(waiting.wait_for(100ms), std::future_status::timeout);
  {
    auto stub = proto::ParameterServer::NewStub(
        grpc::CreateChannel(addresses_[0], grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    AttachCredentials(kCredentials, context);
    auto stream = stub->PushPull(&context);
    proto::PushChunk chunk;
    chunk.set_tensor("w");
    chunk.set_worker(1);
    chunk.set_step(1);
    chunk.set_offset(0);
    const std::vector<float> part = {1, 2};
    chunk.set_data(part.data(), part.size() * sizeof(float));
    ASSERT_TRUE(stream->Write(chunk));
    stream->WritesDone();  // the push ends two elements short
    proto::ValueChunk value;
    while (stream->Read(&value)) {
    }
    EXPECT_FALSE(stream->Finish().ok());
  }
  ASSERT_EQ(waiting.wait_for(30s), std::future_status::ready) << "worker 0 hung";
  const absl::Status ended = waiting.get().status();
  EXPECT_EQ(ended.code(), absl::StatusCode::kAborted) << ended;
  EXPECT_NE(ended.message().find("worker 1's push of step 1"), std::string::npos) << ended;
}

}  // namespace
}  // namespace testbed
