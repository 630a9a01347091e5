// The parameter server's core without gRPC: aggregation, each optimizer
// against a hand-computed reference over several steps, shard boundaries, and
// refused pushes that change nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <future>
#include <limits>
#include <thread>

#include "allreduce/chunking.h"
#include "common/byte_size.h"
#include "server/parameter_store.h"

namespace testbed {
namespace {

using Clock = std::chrono::steady_clock;

std::span<const std::byte> Bytes(const std::vector<float>& v) {
  return std::as_bytes(std::span(v));
}

proto::TensorSpec Spec(const std::string& name, std::int64_t count, std::uint32_t workers,
                       proto::Optimizer::Kind kind = proto::Optimizer::NONE) {
  proto::TensorSpec spec;
  spec.set_name(name);
  spec.set_count(count);
  spec.set_dtype(proto::Dtype::float32);
  spec.set_workers(workers);
  spec.mutable_optimizer()->set_kind(kind);
  return spec;
}

// Pushes `values` (the shard's slice) for `worker` in chunks of `chunk` elements.
absl::Status Push(ParameterStore& store, const std::string& name, std::uint32_t worker,
                  std::uint64_t step, std::int64_t offset, const std::vector<float>& values,
                  std::size_t chunk = 3) {
  auto session = store.BeginPush(name, worker, step);
  if (!session.ok()) return session.status();
  for (std::size_t at = 0; at < values.size(); at += chunk) {
    const std::size_t n = std::min(chunk, values.size() - at);
    if (absl::Status st = (*session)->AddChunk(offset + at, Bytes(values).subspan(at * 4, n * 4));
        !st.ok()) {
      return st;
    }
  }
  return (*session)->Commit();
}

std::vector<float> Pull(ParameterStore& store, const std::string& name, std::uint64_t step,
                        absl::Status* status = nullptr) {
  std::vector<float> out;
  const absl::Status st = store.Pull(name, step, Clock::now() + std::chrono::seconds(5),
                                     [&](std::int64_t, std::span<const std::byte> data,
                                         const std::shared_ptr<const void>&) {
                                       const float* f = reinterpret_cast<const float*>(data.data());
                                       out.insert(out.end(), f, f + data.size() / 4);
                                       return true;
                                     });
  if (status) {
    *status = st;
  } else if (!st.ok()) {
    ADD_FAILURE() << st;
  }
  return out;
}

TEST(ParameterStoreTest, AggregatesTheSumOfAllWorkersEachStep) {
  ParameterStore store;
  ASSERT_TRUE(store.Declare(Spec("w", 5, 3), 1, 0).ok());
  for (std::uint64_t step = 1; step <= 3; ++step) {
    for (std::uint32_t w = 0; w < 3; ++w) {
      std::vector<float> g(5);
      for (int i = 0; i < 5; ++i) g[i] = static_cast<float>(step * 100 + w * 10 + i);
      ASSERT_TRUE(Push(store, "w", w, step, 0, g).ok());
    }
    const std::vector<float> sum = Pull(store, "w", step);
    ASSERT_EQ(sum.size(), 5u);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(sum[i], 3 * (step * 100 + i) + 30) << "step " << step;
  }
  EXPECT_EQ(store.bytes_received(), 3u * 3 * 5 * 4);
  EXPECT_EQ(store.bytes_sent(), 3u * 5 * 4);
}

// A transport delivers a chunk in pieces cut anywhere, also inside an element;
// the store sums them as if they were one.
TEST(ParameterStoreTest, SumsChunksWhosePiecesSplitElements) {
  // Values are worked out in chunks of the store's size: chunk ends fall
  // inside pieces and between them.
  for (std::size_t chunk_bytes : {ParameterStore::kDefaultChunkBytes, std::size_t{4},
                                  std::size_t{12}, std::size_t{260}}) {
  SCOPED_TRACE(chunk_bytes);
  ParameterStore store(chunk_bytes);
  constexpr int kCount = 300;  // more than one vectorized block, plus a tail
  ASSERT_TRUE(store.Declare(Spec("w", kCount, 3), 1, 0).ok());
  std::vector<float> expected(kCount);
  for (std::uint32_t w = 0; w < 3; ++w) {
    auto values = std::make_shared<std::vector<float>>(kCount);
    for (int i = 0; i < kCount; ++i) {
      (*values)[i] = static_cast<float>(i * 3 + w);
      expected[i] += (*values)[i];
    }
    const std::span<const std::byte> bytes = std::as_bytes(std::span(*values));
    // Each worker's own cuts: pieces of w+1, 2w+3, 3w+5, ... bytes, then the rest.
    std::vector<std::span<const std::byte>> pieces;
    std::size_t at = 0;
    for (std::size_t n = w + 1; at + n < bytes.size() / 2; n += w + 2) {
      pieces.push_back(bytes.subspan(at, n));
      at += n;
    }
    pieces.push_back(bytes.subspan(at));
    auto session = store.BeginPush("w", w, 1);
    ASSERT_TRUE(session.ok());
    ASSERT_TRUE((*session)->AddChunk(0, pieces, values).ok());
    ASSERT_TRUE((*session)->Commit().ok());
  }
  EXPECT_EQ(Pull(store, "w", 1), expected);
  }
}

TEST(ParameterStoreTest, AveragesWhenAsked) {
  ParameterStore store;
  proto::TensorSpec spec = Spec("w", 2, 2);
  spec.mutable_optimizer()->set_average(true);
  ASSERT_TRUE(store.Declare(spec, 1, 0).ok());
  ASSERT_TRUE(Push(store, "w", 0, 1, 0, {1, 10}).ok());
  ASSERT_TRUE(Push(store, "w", 1, 1, 0, {3, 20}).ok());
  EXPECT_EQ(Pull(store, "w", 1), (std::vector<float>{2, 15}));
}

// The gradients of the reference run: worker w, step s, element i.
float Gradient(std::uint32_t w, std::uint64_t s, int i) { return 0.5f * (w + 1) - 0.25f * s + i; }

TEST(ParameterStoreTest, OptimizersMatchAHandComputedReference) {
  struct Case {
    proto::Optimizer::Kind kind;
    double lr, momentum;
  };
  for (const Case& c : {Case{proto::Optimizer::SGD, 0.1, 0}, Case{proto::Optimizer::MOMENTUM, 0.1, 0.9},
                        Case{proto::Optimizer::ADAM, 0.01, 0}}) {
    SCOPED_TRACE(proto::Optimizer::Kind_Name(c.kind));
    ParameterStore store(/*chunk_bytes=*/8);  // each chunk starts from its own offset
    proto::TensorSpec spec = Spec("w", 3, 2, c.kind);
    spec.mutable_optimizer()->set_learning_rate(c.lr);
    spec.mutable_optimizer()->set_momentum(c.momentum);
    ASSERT_TRUE(store.Declare(spec, 1, 0).ok());
    double w[3] = {0, 0, 0}, v[3] = {0, 0, 0}, m2[3] = {0, 0, 0};
    for (std::uint64_t step = 1; step <= 4; ++step) {
      for (std::uint32_t worker = 0; worker < 2; ++worker) {
        std::vector<float> g = {Gradient(worker, step, 0), Gradient(worker, step, 1),
                                Gradient(worker, step, 2)};
        ASSERT_TRUE(Push(store, "w", worker, step, 0, g, 1).ok());
      }
      for (int i = 0; i < 3; ++i) {
        const double g = Gradient(0, step, i) + Gradient(1, step, i);
        switch (c.kind) {
          case proto::Optimizer::SGD: w[i] -= c.lr * g; break;
          case proto::Optimizer::MOMENTUM:
            v[i] = c.momentum * v[i] + g;
            w[i] -= c.lr * v[i];
            break;
          default: {
            v[i] = 0.9 * v[i] + 0.1 * g;
            m2[i] = 0.999 * m2[i] + 0.001 * g * g;
            const double mhat = v[i] / (1 - std::pow(0.9, step));
            const double vhat = m2[i] / (1 - std::pow(0.999, step));
            w[i] -= c.lr * mhat / (std::sqrt(vhat) + 1e-8);
          }
        }
      }
      const std::vector<float> got = Pull(store, "w", step);
      for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], w[i], 1e-5) << "step " << step << " i " << i;
    }
  }
}

TEST(ParameterStoreTest, ShardsSplitOddSizesExactly) {
  // 10 elements over 3 shards: [0,4) [4,7) [7,10).
  std::vector<ParameterStore> shards(3);
  std::int64_t covered = 0;
  for (int s = 0; s < 3; ++s) {
    auto slice = shards[s].Declare(Spec("w", 10, 2), 3, s);
    ASSERT_TRUE(slice.ok());
    EXPECT_EQ(slice->offset, covered);
    EXPECT_EQ(slice->offset, ChunkOf(10, 3, s).offset);
    covered += slice->count;
    for (std::uint32_t w = 0; w < 2; ++w) {
      std::vector<float> g(slice->count);
      for (std::int64_t i = 0; i < slice->count; ++i) g[i] = static_cast<float>(slice->offset + i + w);
      ASSERT_TRUE(Push(shards[s], "w", w, 1, slice->offset, g).ok());
    }
    const std::vector<float> sum = Pull(shards[s], "w", 1);
    for (std::int64_t i = 0; i < slice->count; ++i) EXPECT_EQ(sum[i], 2 * (slice->offset + i) + 1);
  }
  EXPECT_EQ(covered, 10);
  // More shards than elements: the last ones hold nothing, and still complete steps.
  ParameterStore tiny;
  auto empty = tiny.Declare(Spec("t", 2, 1), 3, 2);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->count, 0);
  ASSERT_TRUE(Push(tiny, "t", 0, 1, empty->offset, {}).ok());
  EXPECT_TRUE(Pull(tiny, "t", 1).empty());
}

TEST(ParameterStoreTest, RefusedPushesChangeNothing) {
  ParameterStore store;
  auto slice = store.Declare(Spec("w", 4, 2), 2, 1);  // slice [2, 4)
  ASSERT_TRUE(slice.ok());
  // A chunk outside the slice, after a good one: refused, and nothing applied.
  auto session = store.BeginPush("w", 0, 1);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->AddChunk(2, Bytes({100.0f})).ok());
  const absl::Status outside = (*session)->AddChunk(3, Bytes({1.0f, 2.0f}));
  EXPECT_EQ(outside.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(outside.message().find("outside this shard's slice [2, 4)"), std::string::npos);
  // An incomplete push cannot commit.
  EXPECT_FALSE((*session)->Commit().ok());

  ASSERT_TRUE(Push(store, "w", 0, 1, 2, {1, 2}).ok());
  // A second push by the same worker for the same step.
  const absl::Status twice = Push(store, "w", 0, 1, 2, {50, 50});
  EXPECT_EQ(twice.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(twice.message().find("worker 0 already pushed step 1"), std::string::npos);
  // A step that is not open, and an unknown worker.
  EXPECT_EQ(Push(store, "w", 1, 2, 2, {1, 1}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Push(store, "w", 7, 1, 2, {1, 1}).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(Push(store, "w", 1, 1, 2, {10, 20}).ok());
  EXPECT_EQ(Pull(store, "w", 1), (std::vector<float>{11, 22}));  // only the valid pushes
  // A push for a step already complete.
  const absl::Status late = Push(store, "w", 1, 1, 2, {5, 5});
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(late.message().find("step 1 is already complete"), std::string::npos);
  EXPECT_EQ(Pull(store, "w", 1), (std::vector<float>{11, 22}));
  EXPECT_EQ(store.BeginPush("nope", 0, 1).status().code(), absl::StatusCode::kNotFound);
}

// A puller that went away (its call cancelled) stops waiting long before
// the deadline, so its thread serves others again.
TEST(ParameterStoreTest, APullWhoseCallerWentAwayStopsWaiting) {
  ParameterStore store;
  ASSERT_TRUE(store.Declare(Spec("w", 2, 2), 1, 0).ok());
  std::atomic<bool> gone{false};
  absl::Status st;
  std::thread puller([&] {
    st = store.Pull(
        "w", 1, Clock::now() + std::chrono::hours(1),
        [](std::int64_t, std::span<const std::byte>, const auto&) { return true; },
        [&] { return gone.load(); });
  });
  gone = true;
  puller.join();  // within kGoneCheck, not an hour
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled) << st;
}

TEST(ParameterStoreTest, PullWaitsForTheStepAndTimesOutNamingMissingWorkers) {
  ParameterStore store;
  ASSERT_TRUE(store.Declare(Spec("w", 2, 3), 1, 0).ok());
  ASSERT_TRUE(Push(store, "w", 1, 1, 0, {1, 1}).ok());
  absl::Status st = store.Pull(
      "w", 1, Clock::now() + std::chrono::milliseconds(100),
      [](std::int64_t, std::span<const std::byte>, const auto&) { return true; });
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(st.message().find("workers 0, 2"), std::string::npos) << st;

  std::vector<float> got;
  std::thread puller([&] { got = Pull(store, "w", 1); });
  ASSERT_TRUE(Push(store, "w", 0, 1, 0, {2, 2}).ok());
  ASSERT_TRUE(Push(store, "w", 2, 1, 0, {3, 3}).ok());
  puller.join();
  EXPECT_EQ(got, (std::vector<float>{6, 6}));
}

// A pull's values may be sent after the pull returns (a transport holds them
// by `owner`): later steps must not write into them meanwhile.
TEST(ParameterStoreTest, HeldValuesStayUnchangedThroughLaterSteps) {
  for (const auto kind : {proto::Optimizer::NONE, proto::Optimizer::SGD}) {
    SCOPED_TRACE(proto::Optimizer::Kind_Name(kind));
    ParameterStore store(/*chunk_bytes=*/8);
    proto::TensorSpec spec = Spec("w", 5, 2, kind);
    spec.mutable_optimizer()->set_learning_rate(1);
    ASSERT_TRUE(store.Declare(spec, 1, 0).ok());
    std::vector<std::shared_ptr<const void>> held;
    std::vector<std::span<const std::byte>> spans;
    std::vector<float> first;
    for (std::uint64_t step = 1; step <= 4; ++step) {
      for (std::uint32_t w = 0; w < 2; ++w) {
        ASSERT_TRUE(Push(store, "w", w, step, 0, std::vector<float>(5, step * 10.0f + w)).ok());
      }
      if (step == 1) {  // keep step 1's values as a transport would
        ASSERT_TRUE(store
                        .Pull("w", 1, Clock::now() + std::chrono::seconds(5),
                              [&](std::int64_t, std::span<const std::byte> data,
                                  const std::shared_ptr<const void>& owner) {
                                held.push_back(owner);
                                spans.push_back(data);
                                const float* f = reinterpret_cast<const float*>(data.data());
                                first.insert(first.end(), f, f + data.size() / 4);
                                return true;
                              })
                        .ok());
      } else {
        EXPECT_EQ(Pull(store, "w", step).size(), 5u);
      }
    }
    std::vector<float> still;
    for (std::span<const std::byte> data : spans) {
      const float* f = reinterpret_cast<const float*>(data.data());
      still.insert(still.end(), f, f + data.size() / 4);
    }
    EXPECT_EQ(still, first);
    EXPECT_EQ(first, std::vector<float>(5, kind == proto::Optimizer::NONE ? 21.0f : -21.0f));
  }
}

// N workers push and pull at once; each chunk is summed by whichever pull
// gets to it first, and every puller sees the exact sum.
TEST(ParameterStoreTest, ConcurrentPullersAllGetTheExactSum) {
  constexpr std::uint32_t kWorkers = 4;
  constexpr int kCount = 1001, kSteps = 20;
  ParameterStore store(/*chunk_bytes=*/12);
  ASSERT_TRUE(store.Declare(Spec("w", kCount, kWorkers), 1, 0).ok());
  std::vector<int> wrong(kWorkers, 0);
  std::vector<std::thread> workers;
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      for (std::uint64_t step = 1; step <= kSteps; ++step) {
        std::vector<float> g(kCount);
        for (int i = 0; i < kCount; ++i) g[i] = static_cast<float>(step * 1000 + w * 100 + i);
        if (!Push(store, "w", w, step, 0, g, 97).ok()) {
          ++wrong[w];
          return;
        }
        const std::vector<float> sum = Pull(store, "w", step);
        for (int i = 0; i < kCount; ++i) {
          const float want = static_cast<float>(kWorkers * (step * 1000 + i) + 600);
          if (i >= static_cast<int>(sum.size()) || sum[i] != want) ++wrong[w];
        }
      }
    });
  }
  for (std::thread& t : workers) t.join();
  EXPECT_EQ(wrong, std::vector<int>(kWorkers, 0));
}

// A client may push without pulling; every step still updates the parameters.
TEST(ParameterStoreTest, StepsNobodyPulledStillApplyTheOptimizer) {
  ParameterStore store(/*chunk_bytes=*/4);
  proto::TensorSpec spec = Spec("w", 3, 2, proto::Optimizer::SGD);
  spec.mutable_optimizer()->set_learning_rate(0.5);
  ASSERT_TRUE(store.Declare(spec, 1, 0).ok());
  for (std::uint64_t step = 1; step <= 3; ++step) {
    for (std::uint32_t w = 0; w < 2; ++w) {
      ASSERT_TRUE(Push(store, "w", w, step, 0, {1, 2, 3}).ok());
    }
  }
  // Three steps of w -= 0.5 * (2 * g).
  EXPECT_EQ(Pull(store, "w", 3), (std::vector<float>{-3, -6, -9}));
}

// A pull that records what it gets, on a thread of its own, and says when its
// first chunk came.
class BackgroundPull {
 public:
  BackgroundPull(ParameterStore& store, const std::string& name, std::uint64_t step)
      : thread_([this, &store, name, step] {
          status_ = store.Pull(name, step, Clock::now() + std::chrono::seconds(10),
                               [this](std::int64_t, std::span<const std::byte> data,
                                      const std::shared_ptr<const void>&) {
                                 {
                                   std::lock_guard lock(mu_);
                                   const float* f = reinterpret_cast<const float*>(data.data());
                                   got_.insert(got_.end(), f, f + data.size() / 4);
                                 }
                                 cv_.notify_all();
                                 return true;
                               });
          std::lock_guard lock(mu_);
          ended_ = true;
          cv_.notify_all();
        }) {}
  ~BackgroundPull() {
    if (thread_.joinable()) thread_.join();
  }
  // Waits (at most 10 s) until at least `count` values came or the pull ended.
  std::vector<float> WaitFor(std::size_t count) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return got_.size() >= count || ended_; });
    return got_;
  }
  std::vector<float> got() {
    std::lock_guard lock(mu_);
    return got_;
  }
  absl::Status Join() {
    thread_.join();
    return status_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<float> got_;
  bool ended_ = false;
  absl::Status status_;
  std::thread thread_;  // last: it uses the members above
};

// Full duplex: chunk 0 of a step is served as soon as every worker staged it,
// while every push is still under way (a store that waited for whole pushes
// would never serve it here: no push ends before the pull has chunk 0).
TEST(ParameterStoreTest, AChunkIsServedOnceEveryWorkerStagedItBeforeAnyPushEnds) {
  constexpr std::uint32_t kWorkers = 3;
  ParameterStore store(/*chunk_bytes=*/8);  // chunks of 2 floats
  ASSERT_TRUE(store.Declare(Spec("w", 6, kWorkers), 1, 0).ok());
  std::vector<std::unique_ptr<ParameterStore::PushSession>> pushes;
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    auto session = store.BeginPush("w", w, 1);
    ASSERT_TRUE(session.ok()) << session.status();
    pushes.push_back(*std::move(session));
  }
  const auto gradient = [](std::uint32_t w) {
    std::vector<float> g(6);
    for (int i = 0; i < 6; ++i) g[i] = static_cast<float>(100 * (w + 1) + i);
    return g;
  };
  BackgroundPull pull(store, "w", 1);
  for (std::uint32_t w = 0; w + 1 < kWorkers; ++w) {
    ASSERT_TRUE(pushes[w]->AddChunk(0, Bytes(gradient(w)).subspan(0, 8)).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(pull.got().empty()) << "served before the last worker staged chunk 0";
  ASSERT_TRUE(pushes[kWorkers - 1]->AddChunk(0, Bytes(gradient(kWorkers - 1)).subspan(0, 8)).ok());
  EXPECT_EQ(pull.WaitFor(2), (std::vector<float>{600, 603}));
  // The rest, in pieces of another size than the store's chunks.
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(pushes[w]->AddChunk(2, Bytes(gradient(w)).subspan(8, 12)).ok());
    ASSERT_TRUE(pushes[w]->AddChunk(5, Bytes(gradient(w)).subspan(20, 4)).ok());
    ASSERT_TRUE(pushes[w]->Commit().ok());
  }
  ASSERT_TRUE(pull.Join().ok());
  EXPECT_EQ(pull.got(), (std::vector<float>{600, 603, 606, 609, 612, 615}));
  EXPECT_EQ(Pull(store, "w", 1), pull.got());
}

// A push that breaks off once its step is served fails the step's pulls, the
// waiting ones and later ones, naming the worker: no partial sum, no hang.
TEST(ParameterStoreTest, APushThatFailsHalfWayFailsTheServedStepsPulls) {
  for (const bool dropped : {false, true}) {
    SCOPED_TRACE(dropped ? "session dropped" : "chunk out of order");
    ParameterStore store(/*chunk_bytes=*/8);
    ASSERT_TRUE(store.Declare(Spec("w", 4, 2), 1, 0).ok());
    auto first = store.BeginPush("w", 0, 1);
    auto second = store.BeginPush("w", 1, 1);
    ASSERT_TRUE(first.ok() && second.ok());
    ASSERT_TRUE((*first)->AddChunk(0, Bytes({1, 2})).ok());
    ASSERT_TRUE((*second)->AddChunk(0, Bytes({10, 20})).ok());
    BackgroundPull pull(store, "w", 1);
    EXPECT_EQ(pull.WaitFor(2), (std::vector<float>{11, 22}));  // a whole chunk: all pushed it
    if (dropped) {
      second->reset();
    } else {
      EXPECT_EQ((*second)->AddChunk(3, Bytes({1})).code(), absl::StatusCode::kOutOfRange);
    }
    const absl::Status waiting = pull.Join();
    EXPECT_EQ(waiting.code(), absl::StatusCode::kAborted) << waiting;
    EXPECT_NE(waiting.message().find("step 1 failed: worker 1's push broke off after 2 of 4"),
              std::string::npos)
        << waiting;
    EXPECT_EQ(pull.got(), (std::vector<float>{11, 22}));
    absl::Status later;
    EXPECT_TRUE(Pull(store, "w", 1, &later).empty());
    EXPECT_EQ(later, waiting);
    EXPECT_EQ((*first)->AddChunk(2, Bytes({3, 4})).code(), absl::StatusCode::kAborted);
    EXPECT_EQ(store.BeginPush("w", 1, 1).status(), waiting);
  }
}

// Before every worker joined a step nothing of it is used, so a push that
// breaks off is withdrawn and the worker pushes the step again.
TEST(ParameterStoreTest, APushDroppedBeforeItsStepIsServedIsWithdrawn) {
  ParameterStore store(/*chunk_bytes=*/8);
  ASSERT_TRUE(store.Declare(Spec("w", 4, 2), 1, 0).ok());
  {
    auto session = store.BeginPush("w", 0, 1);
    ASSERT_TRUE(session.ok());
    ASSERT_TRUE((*session)->AddChunk(0, Bytes({100, 100})).ok());
  }  // dropped
  ASSERT_TRUE(Push(store, "w", 0, 1, 0, {1, 2, 3, 4}).ok());
  ASSERT_TRUE(Push(store, "w", 1, 1, 0, {10, 20, 30, 40}).ok());
  EXPECT_EQ(Pull(store, "w", 1), (std::vector<float>{11, 22, 33, 44}));
}

// Each worker pushes on one thread while it pulls the same step on another,
// for many steps: every value exact, whatever the interleaving.
TEST(ParameterStoreTest, WorkersPushingWhileTheyPullGetTheExactSum) {
  constexpr std::uint32_t kWorkers = 4;
  constexpr int kCount = 1001, kSteps = 20;
  ParameterStore store(/*chunk_bytes=*/40);
  ASSERT_TRUE(store.Declare(Spec("w", kCount, kWorkers), 1, 0).ok());
  std::vector<int> wrong(kWorkers, 0);
  std::vector<std::thread> workers;
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      for (std::uint64_t step = 1; step <= kSteps; ++step) {
        std::vector<float> g(kCount);
        for (int i = 0; i < kCount; ++i) g[i] = static_cast<float>(step * 1000 + w * 100 + i);
        absl::Status pushed;
        std::thread pusher([&] { pushed = Push(store, "w", w, step, 0, g, 7); });
        const std::vector<float> sum = Pull(store, "w", step);
        pusher.join();
        if (!pushed.ok()) ++wrong[w];
        for (int i = 0; i < kCount; ++i) {
          const float want = static_cast<float>(kWorkers * (step * 1000 + i) + 600);
          if (i >= static_cast<int>(sum.size()) || sum[i] != want) ++wrong[w];
        }
      }
    });
  }
  for (std::thread& t : workers) t.join();
  EXPECT_EQ(wrong, std::vector<int>(kWorkers, 0));
}

TEST(ParameterStoreTest, DeclarationsMustAgree) {
  ParameterStore store;
  ASSERT_TRUE(store.Declare(Spec("w", 8, 2), 1, 0).ok());
  EXPECT_TRUE(store.Declare(Spec("w", 8, 2), 1, 0).ok());
  EXPECT_EQ(store.Declare(Spec("w", 9, 2), 1, 0).status().code(), absl::StatusCode::kAlreadyExists);
  proto::TensorSpec int_adam = Spec("i", 4, 1, proto::Optimizer::ADAM);
  int_adam.set_dtype(proto::Dtype::int32);
  EXPECT_FALSE(store.Declare(int_adam, 1, 0).ok());
}

// A dtype number this build does not know (a newer client's) is refused by
// name, not taken for float32, the enum's zero.
TEST(ParameterStoreTest, AnUnknownDtypeIsRefusedByName) {
  ParameterStore store;
  proto::TensorSpec future = Spec("f", 8, 2);
  future.set_dtype(static_cast<proto::Dtype::Kind>(17));
  const absl::Status refused = store.Declare(future, 1, 0).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(), "tensor 'f': unknown dtype 17");
}

// float16 is an element type of the collectives, not of the store: refused at
// Declare, naming the types it holds and the way halves do reach it.
TEST(ParameterStoreTest, Float16TensorsAreRefusedNamingTheAcceptedTypes) {
  ParameterStore store;
  for (proto::Optimizer::Kind kind : {proto::Optimizer::NONE, proto::Optimizer::SGD}) {
    proto::TensorSpec halves = Spec("h", 8, 2, kind);
    halves.set_dtype(proto::Dtype::float16);
    const absl::Status refused = store.Declare(halves, 1, 0).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    for (const char* part : {"'h'", "float32, float64 or int32", "not float16", "FP16"}) {
      EXPECT_NE(refused.message().find(part), std::string::npos) << part << ": " << refused;
    }
  }
  proto::TensorSpec wide = Spec("h", 8, 2);
  EXPECT_TRUE(store.Declare(wide, 1, 0).ok()) << "the name was not taken by the refusal";
}

// A declaration the shard cannot hold is refused by name before anything is
// allocated; the store keeps serving.
TEST(ParameterStoreTest, SlicesOverTheLimitAreRefusedNamingIt) {
  ParameterStore store(ParameterStore::Options{.max_tensor_bytes = 1 << 10});
  // 256 float32 are exactly 1 KiB; 512 over two shards are 1 KiB a shard.
  EXPECT_TRUE(store.Declare(Spec("fits", 256, 1), 1, 0).ok());
  EXPECT_TRUE(store.Declare(Spec("half", 512, 1), 2, 1).ok());
  const absl::Status over = store.Declare(Spec("over", 257, 1), 1, 0).status();
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over.message(),
            "tensor 'over': its slice of 257 float32 elements (1.004 KiB) exceeds this shard's "
            "limit of 1 KiB per tensor (testbed-server --max-tensor-bytes)");
  // Counts far beyond memory, also ones whose bytes overflow 64 bits.
  for (const std::int64_t count : {std::int64_t{1} << 40, std::int64_t{1} << 62,
                                   std::numeric_limits<std::int64_t>::max()}) {
    SCOPED_TRACE(count);
    const absl::Status huge = store.Declare(Spec("huge", count, 1), 1, 0).status();
    EXPECT_EQ(huge.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(huge.message().find("limit of 1 KiB per tensor (testbed-server --max-tensor-bytes)"),
              std::string::npos)
        << huge;
  }
  EXPECT_NE(store.Declare(Spec("huge", std::int64_t{1} << 62, 1), 1, 0)
                .status()
                .message()
                .find("its slice of 4611686018427387904 float32 elements (16 EiB)"),
            std::string::npos);
  // The refused names were never declared; the declared tensor still works.
  EXPECT_EQ(store.BeginPush("huge", 0, 1).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(Push(store, "fits", 0, 1, 0, std::vector<float>(256, 1)).ok());
  EXPECT_EQ(Pull(store, "fits", 1), std::vector<float>(256, 1));
}

TEST(ParameterStoreTest, TheDefaultLimitIsHalfThisMachinesMemory) {
  const ParameterStore store;
  EXPECT_EQ(store.max_tensor_bytes(), DefaultMaxTensorBytes());
  EXPECT_EQ(store.max_total_bytes(), DefaultMaxTensorBytes());
  EXPECT_EQ(DefaultMaxTensorBytes(), sysconf(_SC_PHYS_PAGES) / 2 * sysconf(_SC_PAGE_SIZE));
  EXPECT_EQ(HumanByteSize(12.0 * (1 << 30)), "12 GiB");
  EXPECT_EQ(HumanByteSize(1536), "1.5 KiB");
  EXPECT_EQ(HumanByteSize(1000), "1000 B");
  EXPECT_EQ(HumanByteSize(7.75 * (1 << 30)), "7.75 GiB");
}

TEST(ParameterStoreTest, BadCountsAreInvalidArguments) {
  ParameterStore store(ParameterStore::Options{.max_tensor_bytes =
                                                   std::numeric_limits<std::int64_t>::max()});
  const absl::Status negative = store.Declare(Spec("w", -1, 1), 1, 0).status();
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(negative.message().find("count -1"), std::string::npos) << negative;
  // A slice within the limit of a tensor whose bytes overflow 64 bits: 2^62
  // float32 are 2^64 bytes.
  ParameterStore::Options unlimited;
  unlimited.max_tensor_bytes = unlimited.max_total_bytes = std::numeric_limits<std::int64_t>::max();
  ParameterStore roomy(unlimited);
  const absl::Status overflow =
      roomy.Declare(Spec("w", std::int64_t{1} << 62, 1), 1 << 30, 0).status();
  EXPECT_EQ(overflow.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(overflow.message(),
            "tensor 'w': 4611686018427387904 float32 elements are more bytes than 64 bits can "
            "count");
  // An empty tensor is a valid declaration (a sweep's size 0): nothing to hold.
  EXPECT_TRUE(store.Declare(Spec("empty", 0, 1), 1, 0).ok());
}

TEST(ParameterStoreTest, AllSlicesTogetherStayWithinTheShardsLimit) {
  ParameterStore store(ParameterStore::Options{.max_total_bytes = 1 << 10});
  ASSERT_TRUE(store.Declare(Spec("a", 128, 1), 1, 0).ok());  // 512 B
  ASSERT_TRUE(store.Declare(Spec("b", 128, 1), 1, 0).ok());  // 1 KiB in all
  ASSERT_TRUE(store.Declare(Spec("a", 128, 1), 1, 0).ok());  // the same again: no more bytes
  const absl::Status full = store.Declare(Spec("c", 1, 1), 1, 0).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(),
            "tensor 'c': its slice of 4 B with the 1 KiB already declared exceeds this shard's "
            "limit of 1 KiB for all tensors (testbed-server --max-total-tensor-bytes)");
  store.Forget("a");
  store.Forget("a");  // forgetting twice frees nothing twice
  EXPECT_TRUE(store.Declare(Spec("c", 128, 1), 1, 0).ok());
  EXPECT_EQ(store.Declare(Spec("d", 1, 1), 1, 0).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(ParameterStoreTest, TheNumberOfTensorsStaysWithinTheShardsLimit) {
  ParameterStore store(ParameterStore::Options{.max_tensors = 2});
  ASSERT_TRUE(store.Declare(Spec("a", 1, 1), 1, 0).ok());
  ASSERT_TRUE(store.Declare(Spec("b", 1, 1), 1, 0).ok());
  ASSERT_TRUE(store.Declare(Spec("b", 1, 1), 1, 0).ok());  // the same again: not another
  const absl::Status full = store.Declare(Spec("c", 1, 1), 1, 0).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(),
            "tensor 'c': this shard already holds 2 tensors, its limit (testbed-server "
            "--max-tensors); forget some first");
  store.Forget("a");
  EXPECT_TRUE(store.Declare(Spec("c", 1, 1), 1, 0).ok());
}

TEST(ParameterStoreTest, AnUnknownOptimizerIsRefusedWithTheKnownOnes) {
  ParameterStore store;
  proto::TensorSpec spec = Spec("w", 4, 1, static_cast<proto::Optimizer::Kind>(42));
  const absl::Status st = store.Declare(spec, 1, 0).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "tensor 'w': unknown optimizer kind 42 (known: adam, momentum, none, sgd)");
}

}  // namespace
}  // namespace testbed
