// The bucket pipeline every GradientSync overlaps with: buckets cut from the
// gradient, run last to first, each only once backpropagation has finished
// it, a failure reported and the rest of the step skipped, and the time that
// ran before the backward pass ended counted as hidden.
#include "worker/train/bucket_pipeline.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace testbed {
namespace {

TEST(CutIntoBucketsTest, CutsFloatsIntoBucketsOfTheGivenBytesTheLastShorter) {
  const std::vector<BucketExtent> buckets = CutIntoBuckets(25, 40);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].offset, 0);
  EXPECT_EQ(buckets[1].offset, 10);
  EXPECT_EQ(buckets[2].offset, 20);
  EXPECT_EQ(buckets[2].elements, 5);
  ASSERT_EQ(CutIntoBuckets(25, 0).size(), 1u);
  EXPECT_EQ(CutIntoBuckets(25, 0)[0].elements, 25);
  EXPECT_EQ(CutIntoBuckets(25, 2).size(), 25u) << "at least one float a bucket";
  EXPECT_TRUE(CutIntoBuckets(0, 40).empty());
}

// Work that records what ran and can hold a bucket until the test lets it go.
struct Recorder {
  std::mutex mu;
  std::condition_variable changed;
  std::vector<std::size_t> ran;
  std::size_t hold = SIZE_MAX;  // this bucket waits for `released`
  bool released = false;
  std::size_t fail = SIZE_MAX;  // this bucket fails

  BucketPipeline::Work Work() {
    return [this](std::size_t bucket, std::uint64_t step, std::span<float> slice) {
      std::unique_lock<std::mutex> lock(mu);
      ran.push_back(bucket);
      changed.notify_all();
      if (bucket == hold) changed.wait(lock, [this] { return released; });
      for (float& x : slice) x += static_cast<float>(step);
      if (bucket == fail) return absl::UnavailableError("lost connection");
      return absl::OkStatus();
    };
  }
  void WaitForRuns(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    changed.wait(lock, [&] { return ran.size() >= n; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
    changed.notify_all();
  }
};

TEST(BucketPipelineTest, RunsEachReadyBucketLastToFirstBeforeTheBackwardPassEnds) {
  Recorder recorder;
  recorder.hold = 1;
  std::vector<float> gradient(25, 0);
  BucketPipeline pipeline(CutIntoBuckets(25, 40), recorder.Work(),
                          BucketPipeline::Mode::kOverlapped);
  pipeline.Begin(7, gradient);
  pipeline.ReadyFrom(10);  // buckets 1 and 2 are final, bucket 0 is not
  recorder.WaitForRuns(2);
  {
    std::lock_guard<std::mutex> lock(recorder.mu);
    EXPECT_EQ(recorder.ran, (std::vector<std::size_t>{2, 1}));
  }
  recorder.Release();
  ASSERT_TRUE(pipeline.Finish(7, gradient).ok());
  EXPECT_EQ(recorder.ran, (std::vector<std::size_t>{2, 1, 0}));
  EXPECT_EQ(gradient, std::vector<float>(25, 7.0f)) << "every float once, in place";
  EXPECT_GT(pipeline.overlapped_seconds(), 0) << "buckets 2 and 1 ran during backpropagation";

  // A step nobody announced runs whole at Finish, nothing of it hidden.
  recorder.ran.clear();
  ASSERT_TRUE(pipeline.Finish(8, gradient).ok());
  EXPECT_EQ(recorder.ran, (std::vector<std::size_t>{2, 1, 0}));
  EXPECT_EQ(pipeline.overlapped_seconds(), 0);
  EXPECT_EQ(gradient, std::vector<float>(25, 15.0f));
}

class BucketPipelineModeTest : public ::testing::TestWithParam<BucketPipeline::Mode> {};

TEST_P(BucketPipelineModeTest, AFailureEndsTheStepAndSkipsTheRestButNotTheNextStep) {
  Recorder recorder;
  recorder.fail = 1;
  std::vector<float> gradient(25, 0);
  BucketPipeline pipeline(CutIntoBuckets(25, 40), recorder.Work(), GetParam());
  pipeline.Begin(1, gradient);
  const absl::Status status = pipeline.Finish(1, gradient);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(recorder.ran, (std::vector<std::size_t>{2, 1})) << "bucket 0 skipped";
  recorder.fail = SIZE_MAX;
  recorder.ran.clear();
  EXPECT_TRUE(pipeline.Finish(2, gradient).ok());
  EXPECT_EQ(recorder.ran, (std::vector<std::size_t>{2, 1, 0}));
}

INSTANTIATE_TEST_SUITE_P(BothModes, BucketPipelineModeTest,
                         ::testing::Values(BucketPipeline::Mode::kOverlapped,
                                           BucketPipeline::Mode::kAfterBackward));

TEST(BucketPipelineTest, AfterBackwardRunsEveryBucketInFinishOnTheCallersThread) {
  std::vector<std::thread::id> threads;
  std::vector<std::size_t> ran;
  std::vector<float> gradient(25, 0);
  BucketPipeline pipeline(
      CutIntoBuckets(25, 40),
      [&](std::size_t bucket, std::uint64_t step, std::span<float> slice) {
        threads.push_back(std::this_thread::get_id());
        ran.push_back(bucket);
        for (float& x : slice) x += static_cast<float>(step);
        return absl::OkStatus();
      },
      BucketPipeline::Mode::kAfterBackward);
  pipeline.Begin(3, gradient);
  pipeline.ReadyFrom(0);
  EXPECT_TRUE(ran.empty()) << "nothing runs during the backward pass";
  ASSERT_TRUE(pipeline.Finish(3, gradient).ok());
  EXPECT_EQ(ran, (std::vector<std::size_t>{2, 1, 0})) << "the order overlapped ranks use";
  EXPECT_EQ(threads, std::vector<std::thread::id>(3, std::this_thread::get_id()));
  EXPECT_EQ(gradient, std::vector<float>(25, 3.0f));
  EXPECT_EQ(pipeline.overlapped_seconds(), 0);
}

TEST(BucketPipelineTest, EndsItsThreadWithAStepNeverFinished) {
  Recorder recorder;
  std::vector<float> gradient(25, 0);
  {
    BucketPipeline pipeline(CutIntoBuckets(25, 40), recorder.Work(),
                            BucketPipeline::Mode::kOverlapped);
    pipeline.Begin(1, gradient);
  }  // joins: nothing was ready, nothing ran
  EXPECT_TRUE(recorder.ran.empty());
}

}  // namespace
}  // namespace testbed
