// The parameter server's stale modes (server/parameter_store.h, "Stale
// modes"): bounded staleness holds a fast worker within k steps of the
// slowest, a slowed worker held by the test; asynchronous never waits for
// others; each push is applied on its own, exactly on integer-valued data; a
// push that breaks off ends everybody's waits with an error naming its
// worker; and declarations that make no sense are refused.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "server/parameter_store.h"

namespace testbed {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

proto::TensorSpec Spec(const std::string& name, std::int64_t count, std::uint32_t workers,
                       proto::TensorSpec::Consistency consistency, std::uint32_t staleness = 0,
                       proto::Optimizer::Kind kind = proto::Optimizer::SGD) {
  proto::TensorSpec spec;
  spec.set_name(name);
  spec.set_count(count);
  spec.set_dtype(proto::Dtype::float32);
  spec.set_workers(workers);
  spec.mutable_optimizer()->set_kind(kind);
  spec.mutable_optimizer()->set_learning_rate(0.5);
  spec.mutable_optimizer()->set_average(true);
  spec.set_consistency(consistency);
  spec.set_staleness(staleness);
  return spec;
}

// Pushes `values` (the whole tensor: one shard) for `worker`, two elements a chunk.
absl::Status Push(ParameterStore& store, const std::string& name, std::uint32_t worker,
                  std::uint64_t step, const std::vector<float>& values) {
  auto session = store.BeginPush(name, worker, step);
  if (!session.ok()) return session.status();
  const std::span<const std::byte> bytes = std::as_bytes(std::span(values));
  for (std::size_t at = 0; at < values.size(); at += 2) {
    const std::size_t n = std::min<std::size_t>(2, values.size() - at);
    if (absl::Status st = (*session)->AddChunk(static_cast<std::int64_t>(at),
                                               bytes.subspan(at * 4, n * 4));
        !st.ok()) {
      return st;
    }
  }
  return (*session)->Commit();
}

// Pulls step `step` as `puller` (none: a plain Pull), waiting at most `wait`.
absl::StatusOr<std::vector<float>> Pull(ParameterStore& store, const std::string& name,
                                        std::uint64_t step,
                                        std::optional<std::uint32_t> puller = std::nullopt,
                                        std::chrono::milliseconds wait = 20s) {
  std::vector<float> out;
  const absl::Status st = store.Pull(
      name, step, Clock::now() + wait,
      [&](std::int64_t, std::span<const std::byte> data, const std::shared_ptr<const void>&) {
        const float* f = reinterpret_cast<const float*>(data.data());
        out.insert(out.end(), f, f + data.size() / 4);
        return true;
      },
      {}, puller);
  if (!st.ok()) return st;
  return out;
}

// Waits (sleeping, at most 20 s) until `value` reaches `at_least`.
bool WaitFor(const std::atomic<std::uint64_t>& value, std::uint64_t at_least) {
  const auto deadline = Clock::now() + 20s;
  while (value.load() < at_least) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

std::vector<float> Gradient(std::uint32_t worker, std::uint64_t step) {
  std::vector<float> g(5);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(worker + 2 * step + i);
  return g;
}

// Worker 0 runs ahead as fast as the store lets it (push step t, pull step
// t); the test pushes the slowed worker 1's steps one at a time. With bound
// k, worker 0's pull of step t must not return while worker 1's clock is below
// t - k, and must once it reaches it: so worker 0 stops exactly k steps ahead.
void RunFastAgainstSlowed(proto::TensorSpec::Consistency consistency, std::uint32_t k,
                          std::uint64_t steps) {
  ParameterStore store(8);
  ASSERT_TRUE(store.Declare(Spec("w", 5, 2, consistency, k), 1, 0).ok());
  std::atomic<std::uint64_t> fast_done{0};    // worker 0's pulls that returned
  std::atomic<std::uint64_t> slow_begun{0};   // worker 1's pushes begun (>= its clock)
  std::atomic<std::uint64_t> max_lead{0};     // worker 0's step minus worker 1's pushes begun
  std::thread fast([&] {
    for (std::uint64_t t = 1; t <= steps; ++t) {
      if (absl::Status st = Push(store, "w", 0, t, Gradient(0, t)); !st.ok()) {
        ADD_FAILURE() << st;
        return;
      }
      absl::StatusOr<std::vector<float>> values = Pull(store, "w", t, 0u);
      if (!values.ok()) {
        ADD_FAILURE() << values.status();
        return;
      }
      // Worker 1's clock is at most slow_begun, so this is at most the lead.
      const std::uint64_t begun = slow_begun.load();
      const std::uint64_t lead = t > begun ? t - begun : 0;
      if (lead > max_lead.load()) max_lead = lead;
      fast_done = t;
    }
  });
  const bool bounded = consistency == proto::TensorSpec::BOUNDED_STALENESS;
  for (std::uint64_t slow = 0; slow < steps; ++slow) {  // worker 1 has pushed `slow` steps
    if (bounded) {
      const std::uint64_t allowed = std::min(steps, slow + k);  // pulls of t <= slow + k
      ASSERT_TRUE(WaitFor(fast_done, allowed)) << "worker 1 at " << slow;
      if (allowed < steps) {
        // Worker 0's pull of step allowed + 1 waits for worker 1: give it the
        // chance to return wrongly.
        std::this_thread::sleep_for(50ms);
        EXPECT_EQ(fast_done.load(), allowed) << "worker 0 ran more than " << k
                                             << " steps ahead of worker 1 at step " << slow;
      }
    } else {
      ASSERT_TRUE(WaitFor(fast_done, steps)) << "asynchronous worker 0 waited for worker 1";
    }
    slow_begun = slow + 1;
    ASSERT_TRUE(Push(store, "w", 1, slow + 1, Gradient(1, slow + 1)).ok());
  }
  fast.join();
  EXPECT_EQ(fast_done.load(), steps);
  if (bounded) {
    EXPECT_LE(max_lead.load(), k);
  } else {
    EXPECT_EQ(max_lead.load(), steps);  // it finished before worker 1 began
  }
  // Every push was applied once: SGD with lr 0.5, averaged over 2, on
  // integer-valued gradients is exact whatever the order.
  absl::StatusOr<std::vector<float>> values = Pull(store, "w", steps);
  ASSERT_TRUE(values.ok()) << values.status();
  for (std::size_t i = 0; i < 5; ++i) {
    float sum = 0;
    for (std::uint64_t t = 1; t <= steps; ++t) sum += Gradient(0, t)[i] + Gradient(1, t)[i];
    EXPECT_EQ((*values)[i], -0.25f * sum) << i;
  }
}

TEST(ParameterStoreStaleTest, BoundedStalenessHoldsTheFastWorkerWithinKStepsOfTheSlowest) {
  RunFastAgainstSlowed(proto::TensorSpec::BOUNDED_STALENESS, 2, 8);
}

TEST(ParameterStoreStaleTest, StalenessZeroWaitsForEveryWorkerLikeSynchronousSteps) {
  RunFastAgainstSlowed(proto::TensorSpec::BOUNDED_STALENESS, 0, 4);
}

TEST(ParameterStoreStaleTest, AsynchronousNeverWaitsForOtherWorkers) {
  RunFastAgainstSlowed(proto::TensorSpec::ASYNCHRONOUS, 0, 8);
}

// A pull that names its puller waits for that worker's own push (it reads
// its own writes), also in asynchronous mode; a plain pull does not.
TEST(ParameterStoreStaleTest, APullersOwnPushIsInWhatItGets) {
  ParameterStore store;
  ASSERT_TRUE(store.Declare(Spec("w", 3, 2, proto::TensorSpec::ASYNCHRONOUS), 1, 0).ok());
  absl::StatusOr<std::vector<float>> own = Pull(store, "w", 1, 1u, 100ms);
  ASSERT_EQ(own.status().code(), absl::StatusCode::kDeadlineExceeded) << own.status();
  EXPECT_NE(own.status().message().find("workers 1 (at step 0)"), std::string::npos)
      << own.status();
  absl::StatusOr<std::vector<float>> plain = Pull(store, "w", 1);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(*plain, std::vector<float>(3, 0.0f));
  ASSERT_TRUE(Push(store, "w", 1, 1, {4, 8, 12}).ok());
  own = Pull(store, "w", 1, 1u);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(*own, (std::vector<float>{-1, -2, -3}));
}

// In both stale modes each push goes through the optimizer as it arrives,
// divided by N: after g1 and then g2, SGD's values are -(lr/N)(g1 + g2), and
// a version a pull still holds stays unchanged while newer ones are made.
TEST(ParameterStoreStaleTest, EachPushIsAppliedOnItsOwnAsItArrives) {
  for (const auto consistency :
       {proto::TensorSpec::ASYNCHRONOUS, proto::TensorSpec::BOUNDED_STALENESS}) {
    SCOPED_TRACE(proto::TensorSpec::Consistency_Name(consistency));
    ParameterStore store(8);
    const std::uint32_t k = consistency == proto::TensorSpec::ASYNCHRONOUS ? 0 : 3;
    ASSERT_TRUE(store.Declare(Spec("w", 5, 2, consistency, k), 1, 0).ok());
    const std::vector<float> g1 = {2, -4, 6, 8, 10}, g2 = {1, 3, -5, 7, 100};
    ASSERT_TRUE(Push(store, "w", 0, 1, g1).ok());
    std::vector<std::pair<std::span<const std::byte>, std::shared_ptr<const void>>> held;
    ASSERT_TRUE(store
                    .Pull("w", 1, Clock::now() + 5s,
                          [&](std::int64_t, std::span<const std::byte> data,
                              const std::shared_ptr<const void>& owner) {
                            held.emplace_back(data, owner);
                            return true;
                          })
                    .ok());
    absl::StatusOr<std::vector<float>> after_g1 = Pull(store, "w", 1);
    ASSERT_TRUE(after_g1.ok()) << after_g1.status();
    for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ((*after_g1)[i], -0.25f * g1[i]) << i;

    ASSERT_TRUE(Push(store, "w", 1, 1, g2).ok());
    ASSERT_TRUE(Push(store, "w", 0, 2, g2).ok());  // worker 0 at step 2, worker 1 at 1
    absl::StatusOr<std::vector<float>> after = Pull(store, "w", 2, 0u);
    ASSERT_TRUE(after.ok()) << after.status();
    for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ((*after)[i], -0.25f * (g1[i] + 2 * g2[i])) << i;

    std::vector<float> kept;  // the held version: still g1's alone
    for (const auto& [data, owner] : held) {
      const float* f = reinterpret_cast<const float*>(data.data());
      kept.insert(kept.end(), f, f + data.size() / 4);
    }
    EXPECT_EQ(kept, *after_g1);
  }
}

TEST(ParameterStoreStaleTest, EachWorkerPushesItsStepsInOrderOnce) {
  ParameterStore store;
  ASSERT_TRUE(store.Declare(Spec("w", 2, 2, proto::TensorSpec::BOUNDED_STALENESS, 1), 1, 0).ok());
  EXPECT_EQ(store.BeginPush("w", 0, 2).status().code(), absl::StatusCode::kFailedPrecondition);
  auto first = store.BeginPush("w", 0, 1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(store.BeginPush("w", 0, 1).status().code(), absl::StatusCode::kAlreadyExists);
  const std::vector<float> g = {2, 4};
  ASSERT_TRUE((*first)->AddChunk(0, std::as_bytes(std::span(g))).ok());
  ASSERT_TRUE((*first)->Commit().ok());
  EXPECT_EQ(store.BeginPush("w", 0, 1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.BeginPush("w", 2, 1).status().code(), absl::StatusCode::kInvalidArgument);
  // Worker 0 may push step 2 before worker 1 pushed step 1: pushes never wait.
  EXPECT_TRUE(Push(store, "w", 0, 2, g).ok());
}

// Worker 2's push breaks off (its stream drops) while worker 0 waits, in
// SSP, for worker 2's clock: the wait ends with ABORTED naming worker 2, long
// before its deadline, and so does everything after until the tensor is
// declared again.
TEST(ParameterStoreStaleTest, APushThatBreaksOffEndsTheOthersWaitsNamingItsWorker) {
  ParameterStore store(8);
  const proto::TensorSpec spec = Spec("w", 5, 3, proto::TensorSpec::BOUNDED_STALENESS, 1);
  ASSERT_TRUE(store.Declare(spec, 1, 0).ok());
  for (std::uint32_t w = 0; w < 3; ++w) ASSERT_TRUE(Push(store, "w", w, 1, Gradient(w, 1)).ok());
  ASSERT_TRUE(Push(store, "w", 0, 2, Gradient(0, 2)).ok());
  ASSERT_TRUE(Push(store, "w", 1, 2, Gradient(1, 2)).ok());
  ASSERT_TRUE(Push(store, "w", 0, 3, Gradient(0, 3)).ok());
  // Worker 0's pull of step 3 needs every clock >= 2; worker 2 is at 1.
  auto waiter = std::async(std::launch::async, [&] { return Pull(store, "w", 3, 0u, 600s); });
  EXPECT_EQ(waiter.wait_for(50ms), std::future_status::timeout);
  {
    auto session = store.BeginPush("w", 2, 2);
    ASSERT_TRUE(session.ok());
    const std::vector<float> part = {1, 2};
    ASSERT_TRUE((*session)->AddChunk(0, std::as_bytes(std::span(part))).ok());
  }  // dropped before it covered the slice
  ASSERT_EQ(waiter.wait_for(20s), std::future_status::ready) << "the waiter hung";
  const absl::Status ended = waiter.get().status();
  EXPECT_EQ(ended.code(), absl::StatusCode::kAborted) << ended;
  EXPECT_NE(ended.message().find("worker 2's push of step 2"), std::string::npos) << ended;
  EXPECT_EQ(Pull(store, "w", 1).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Push(store, "w", 1, 3, Gradient(1, 3)).code(), absl::StatusCode::kAborted);
  store.Forget("w");
  ASSERT_TRUE(store.Declare(spec, 1, 0).ok());
  EXPECT_TRUE(Push(store, "w", 2, 1, Gradient(2, 1)).ok());
}

// A worker that stops without a word holds the others until their deadline,
// whose error names it and its clock.
TEST(ParameterStoreStaleTest, AWaitForASilentWorkerEndsAtTheDeadlineNamingIt) {
  ParameterStore store;
  ASSERT_TRUE(store.Declare(Spec("w", 2, 2, proto::TensorSpec::BOUNDED_STALENESS, 0), 1, 0).ok());
  ASSERT_TRUE(Push(store, "w", 0, 1, {2, 2}).ok());
  const absl::Status st = Pull(store, "w", 1, 0u, 100ms).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_NE(st.message().find("staleness 0"), std::string::npos) << st;
  EXPECT_NE(st.message().find("workers 1 (at step 0)"), std::string::npos) << st;
}

TEST(ParameterStoreStaleTest, DeclarationsThatMakeNoSenseAreRefused) {
  ParameterStore store;
  proto::TensorSpec sync_with_bound = Spec("a", 4, 2, proto::TensorSpec::SYNCHRONOUS, 3);
  EXPECT_EQ(store.Declare(sync_with_bound, 1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  proto::TensorSpec async_with_bound = Spec("b", 4, 2, proto::TensorSpec::ASYNCHRONOUS, 3);
  EXPECT_EQ(store.Declare(async_with_bound, 1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  proto::TensorSpec sum = Spec("c", 4, 2, proto::TensorSpec::ASYNCHRONOUS, 0,
                               proto::Optimizer::NONE);
  const absl::Status refused = store.Declare(sum, 1, 0).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("NONE"), std::string::npos) << refused;
  proto::TensorSpec unknown = Spec("d", 4, 2, proto::TensorSpec::SYNCHRONOUS);
  unknown.set_consistency(static_cast<proto::TensorSpec::Consistency>(7));
  EXPECT_EQ(store.Declare(unknown, 1, 0).status().code(), absl::StatusCode::kInvalidArgument);
  // The same limits hold: a slice over the shard's limit is refused by name.
  ParameterStore small(ParameterStore::Options{.max_tensor_bytes = 8, .max_total_bytes = 8});
  EXPECT_EQ(small.Declare(Spec("e", 3, 2, proto::TensorSpec::ASYNCHRONOUS), 1, 0).status().code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace testbed
