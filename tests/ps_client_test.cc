// PsClient (worker/ps_client.cc) against real parameter-server shards in this
// process, over gRPC on loopback: what PushPull leaves in the worker's buffer
// must be what the shards served, slice by slice, not what was pushed. The
// sweep's N = 1 ps run cannot tell these apart (one worker's input already is
// the sum), so the buffer here holds something else than the served values:
// a gradient under SGD (served: -lr g), or one worker's part of a sum of two.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "proto/parameter_server.pb.h"
#include "server/in_process_shard.h"
#include "worker/ps_client.h"

namespace testbed {
namespace {

const Credentials kCredentials{"job-1", "secret"};

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
    tensor.set_dtype("float32");
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

INSTANTIATE_TEST_SUITE_P(Shards, PsClientTest, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return "S" + std::to_string(info.param); });

}  // namespace
}  // namespace testbed
