// `testbed train`: data-parallel training of an MLP on Fashion-MNIST, its
// gradients synchronised through the parameter server or any scheduled
// all-reduce of the registry. Progress on stderr, one JSON line per
// TrainingRow (proto/training.proto) in --out, a summary on stdout.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "experiments/cluster/local_training.h"

namespace testbed {

struct TrainOptions {
  std::string deployment = "local";
  std::vector<int> workers = {2};  // several: a sweep over N, one run each, ascending
  LocalTrainingOptions run;        // its `workers` is set per run
  double bucket_mb = 0;  // into run.bucket_bytes
  std::string data_dir;  // the Fashion-MNIST files; default: Debian's folder
  std::string out;       // JSON lines; none if empty
};

CLI::App* AddTrainCommand(CLI::App& app, TrainOptions& options);

// Sets `row`'s speedup and scaling_efficiency against `one_worker`, the RUN
// row of the same sweep at N = 1 (nothing when either has no throughput).
void SetScaling(const proto::TrainingRow& one_worker, proto::TrainingRow& row);

int RunTrain(const TrainOptions& options, std::ostream& out, std::ostream& err);

}  // namespace testbed
