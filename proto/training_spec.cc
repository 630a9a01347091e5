#include "proto/training_spec.h"

namespace testbed {

bool HasSweepAxes(const proto::TrainingSpec& spec) {
  return spec.worker_counts_size() > 0 || spec.link_rates_size() > 0 || spec.models_size() > 0 ||
         spec.schemes_size() > 0;
}

void ApplyRunDefaults(proto::TrainingSpec& spec) {
  if (spec.workers() == 0) spec.set_workers(kDefaultTrainingWorkers);
  if (spec.servers() == 0) spec.set_servers(kDefaultTrainingServers);
  if (spec.sync().empty()) spec.set_sync(kDefaultTrainingSync);
}

}  // namespace testbed
