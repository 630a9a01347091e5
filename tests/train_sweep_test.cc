// testbed train's sweep loop (experiments/cli/train_sweep.h) with a fake
// deployment: every run is tried, a failed one is named and does not stop
// the others, and the sweep still reports the failure.
#include "experiments/cli/train_sweep.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace testbed {
namespace {

proto::TrainingSpec SweepSpec() {
  proto::TrainingSpec spec;
  spec.set_sync("ring");
  spec.set_steps(1);
  spec.add_worker_counts(2);
  spec.add_worker_counts(4);
  spec.add_worker_counts(8);
  return spec;
}

// Trains nothing: one RUN row per run, and a failure at N = `failing`.
RunOneTraining FakeDeployment(std::vector<int>& tried, int failing) {
  return [&tried, failing](const proto::TrainingSpec& spec, const TrainingRowSink& sink) {
    tried.push_back(static_cast<int>(spec.workers()));
    if (static_cast<int>(spec.workers()) == failing) {
      return absl::DeadlineExceededError("rank 2: wait timed out");
    }
    proto::TrainingRow run;
    run.set_kind(proto::TrainingRow::RUN);
    run.set_workers(spec.workers());
    run.set_sync(spec.sync());
    sink(run);
    return absl::OkStatus();
  };
}

TEST(TrainSweepTest, AFailedRunIsNamedAndTheOthersStillRun) {
  std::vector<int> tried;
  std::ostringstream jsonl, out, err;
  const absl::Status status = RunTrainingSweep(ExpandTrainingSpec(SweepSpec()),
                                               FakeDeployment(tried, 4), &jsonl, out, err);
  EXPECT_EQ(tried, (std::vector<int>{2, 4, 8}));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_NE(err.str().find("testbed train: N = 4: rank 2: wait timed out"), std::string::npos)
      << err.str();
  EXPECT_NE(err.str().find("testbed train: 1 of 3 runs failed: N = 4\n"), std::string::npos)
      << err.str();
  // The runs that worked wrote their rows.
  EXPECT_NE(jsonl.str().find("\"workers\":2"), std::string::npos) << jsonl.str();
  EXPECT_NE(jsonl.str().find("\"workers\":8"), std::string::npos) << jsonl.str();
}

TEST(TrainSweepTest, ASweepWithoutFailuresSaysNothingOfThem) {
  std::vector<int> tried;
  std::ostringstream jsonl, out, err;
  EXPECT_TRUE(RunTrainingSweep(ExpandTrainingSpec(SweepSpec()), FakeDeployment(tried, 0), &jsonl,
                               out, err)
                  .ok());
  EXPECT_EQ(tried.size(), 3u);
  EXPECT_EQ(err.str().find("failed"), std::string::npos) << err.str();
}

}  // namespace
}  // namespace testbed
