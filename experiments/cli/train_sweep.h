// `testbed train`'s sweep: a TrainingSpec's axes (worker_counts, link_rates_bps,
// models, schemes) as the cross-product of one-run specs, and the loop that
// runs them in turn, wherever the ranks run - labelling each run's rows with
// its scheme and model, setting their scaling against N = 1, showing and
// writing them (experiments/cli/train_output.h); a run that fails is named
// and the sweep goes on.
//
// Thread-safety: RunTrainingSweep belongs to the caller's thread; the sink
// it hands `run_one` may be called from one other thread at a time (the
// thread deployment calls it from worker 0's thread).
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/training.pb.h"
#include "worker/train/training_loop.h"

namespace testbed {

// One run of a sweep: its spec (no axes) and the names of its scheme and
// model for the rows (empty where the spec has no such axis).
struct TrainingRun {
  proto::TrainingSpec spec;
  std::string scheme;
  std::string model;
};
// The cross-product of the spec's axes, for each link rate, model and scheme
// N ascending (so N = 1, when swept, comes first: the yardstick of scaling).
std::vector<TrainingRun> ExpandTrainingSpec(const proto::TrainingSpec& spec);

// Sets `row`'s speedup and scaling_efficiency against `one_worker`, the RUN
// row of the same sweep at N = 1 (nothing when either has no throughput).
void SetScaling(const proto::TrainingRow& one_worker, proto::TrainingRow& row);

// Trains one run's spec (no axes) in some deployment, handing its rows to
// `sink` as they come.
using RunOneTraining =
    std::function<absl::Status(const proto::TrainingSpec& spec, const TrainingRowSink& sink)>;

// Trains `runs` in order through `run_one`: progress lines on `err` (and,
// for a sweep, which run starts), every row as a JSON line to `jsonl` unless
// it is null, each run's summary on `out`, and the scaling table after a
// sweep with N = 1 in it. A run that fails is named on `err` and the others
// still run; then the failed runs are listed and the first failure returned.
absl::Status RunTrainingSweep(const std::vector<TrainingRun>& runs, const RunOneTraining& run_one,
                              std::ostream* jsonl, std::ostream& out, std::ostream& err);

}  // namespace testbed
