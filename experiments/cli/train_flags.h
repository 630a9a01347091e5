// `testbed train`'s flags and the TrainingSpec they make: the flags fill a
// spec, or override the one --spec reads where they are typed, and the spec
// is checked - its names, where its daemons go, every run of its sweep -
// before any run starts.
//
// Thread-safety: plain functions on the caller's thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "experiments/cluster/local_training.h"
#include "proto/tls.h"
#include "proto/training.pb.h"
#include "proto/vocabulary.pb.h"
#include "proto/training_spec.h"

namespace testbed {

struct TrainOptions {
  std::string deployment = "local";  // local, run
  // Several: a sweep over N, one run each, ascending.
  std::vector<int> workers = {kDefaultTrainingWorkers};
  LocalTrainingOptions run;        // the flags' values, into the spec
  double bucket_mb = 0;  // into the spec's bucket_bytes
  std::string data_dir;  // the Fashion-MNIST files; default: Debian's folder
  std::string out;       // JSON lines; none if empty
  std::string spec_file;        // a TrainingSpec in text format; flags override it
  proto::Network::Kind network = proto::Network::loopback;  // local, when typed: daemons there
  std::uint64_t link_rate_bps = 0;  // netns: each node's link; 0 unlimited
  std::string coordinator;      // run: HOST:PORT
  int wait_for_workers_s = 30;  // daemons: how long the coordinator waits for N
  int timeout_s = 0;            // each wait of a rank; 0: 120 s
  std::string log_dir;          // local daemons' logs; default: a temp folder
  TlsFlags tls;
  const CLI::App* command = nullptr;  // set by AddTrainCommand: which flags were typed
};

// The `train` subcommand of `app`, its flags bound to `options`, which must
// outlive it.
CLI::App* AddTrainCommand(CLI::App& app, TrainOptions& options);

// The spec the flags and --spec say (sweep axes and all); refuses bad names
// and placements by name.
absl::StatusOr<proto::TrainingSpec> BuildTrainingSpec(const TrainOptions& options);

}  // namespace testbed
