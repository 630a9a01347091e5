// `testbed train`: data-parallel training of an MLP on Fashion-MNIST, its
// gradients synchronised through the parameter server or any scheduled
// all-reduce of the registry. Progress on stderr, one JSON line per
// TrainingRow (proto/training.proto) in --out, a summary on stdout.
#pragma once

#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "experiments/cluster/local_training.h"

namespace testbed {

struct TrainOptions {
  std::string deployment = "local";
  LocalTrainingOptions run;
  double bucket_mb = 0;  // into run.bucket_bytes
  std::string data_dir;  // the Fashion-MNIST files; default: Debian's folder
  std::string out;       // JSON lines; none if empty
};

CLI::App* AddTrainCommand(CLI::App& app, TrainOptions& options);
int RunTrain(const TrainOptions& options, std::ostream& out, std::ostream& err);

}  // namespace testbed
