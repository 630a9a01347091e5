// `testbed train`: data-parallel training of an MLP on Fashion-MNIST, its
// gradients synchronised through the parameter server or any scheduled
// all-reduce of the registry. Progress on stderr, one JSON line per
// TrainingRow (proto/training.proto) in --out, a summary on stdout.
//
// One spelling of the setup: the flags fill a TrainingSpec (or override the
// one --spec reads), and every deployment runs from that spec - the threads
// of this process (local, the default), testbed-worker daemons it starts
// (local with --network loopback or netns), or daemons already deployed
// (run --coordinator). A spec's sweep axes run as their cross-product.
//
// This file wires the pieces together: the flags and the spec they make
// (train_flags.h), the sweep and its rows (train_sweep.h, train_output.h),
// the daemons (train_daemons.h).
#pragma once

#include <ostream>

#include "experiments/cli/train_flags.h"

namespace testbed {

// Trains what `options` say. The exit code: 0; 2 when the command line, the
// spec, TLS or the credentials are refused before any run; 1 when a run (or
// what it needs: the data, --out, the log folder) fails; kInterrupted on
// Ctrl-C.
int RunTrain(const TrainOptions& options, std::ostream& out, std::ostream& err);

}  // namespace testbed
