// What `testbed train` shows of a run's TrainingRows (proto/training.proto):
// a progress line for each PROGRESS row (stderr), a summary line for each
// run and the sweep's scaling table (stdout), and every row as one JSON line
// (--out). Text only: which rows go where is the sweep's
// (experiments/cli/train_sweep.h).
//
// Thread-safety: pure functions, but for the streams they write.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "proto/training.pb.h"

namespace testbed {

// "train: epoch E step S: loss ..., step ... ms (compute ..., exposed
// communication ..., hidden ...), ... payload bytes per step (...)".
std::string ProgressLine(const proto::TrainingRow& row);

// One run's RUN row in a line: its sync, mode, scheme, N, link and model,
// then its accuracy, throughput, step time and time to the target accuracy.
std::string SummaryLine(const proto::TrainingRow& row);

// The sweep's scaling against N = 1, one line per run, and where this
// machine's cores, not the scheme, decide it.
void PrintScaling(const std::vector<proto::TrainingRow>& runs, std::ostream& out);

// `row` as one line of protobuf's JSON (proto field names, every field, also
// those at their defaults), flushed so a reader sees each row as it comes.
void WriteJsonLine(const proto::TrainingRow& row, std::ostream& out);

}  // namespace testbed
