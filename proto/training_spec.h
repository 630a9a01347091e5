// Rules of a TrainingSpec, in one place for the coordinator (which admits a
// run and sizes it) and the workers (which train it): the defaults of the
// fields that say how large a run is, and what makes a spec many runs.
#pragma once

#include "proto/training.pb.h"

namespace testbed {

// The defaults proto/training.proto documents for a run's size and sync.
inline constexpr int kDefaultTrainingWorkers = 2;
inline constexpr int kDefaultTrainingServers = 1;
inline constexpr char kDefaultTrainingSync[] = "ring";

// Whether the spec has sweep axes (worker_counts, link_rates, models,
// schemes): then it is many runs, which `testbed train` submits one by one.
bool HasSweepAxes(const proto::TrainingSpec& spec);

// Sets workers, servers and sync where they are unset, to the defaults above.
void ApplyRunDefaults(proto::TrainingSpec& spec);

}  // namespace testbed
