// `testbed simulate`: the experiment `testbed local --network netns` would
// run, played by the simulator (allreduce/simulator/simulation.h) on the
// spec's fabric instead of on processes - same flags and spec files, same
// rows through the same table, CSV, JSON lines and course table, with
// transport "simulated" - for as many ranks as memory allows
// (kMaxSimulatedWorkers, common/limits.h). docs/simulator.md.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "allreduce/simulator/simulation.h"
#include "experiments/cli/experiment_flags.h"
#include "proto/experiment.pb.h"

namespace testbed {

// What a simulated row says carried its data.
inline constexpr char kSimulatedTransport[] = "simulated";

struct SimulateOptions {
  ExperimentFlags experiment = [] {
    ExperimentFlags flags;
    flags.reader = SpecReader::kSimulator;
    flags.network = proto::Network::netns;  // shaped links are what it simulates
    return flags;
  }();
  // Results files of measured runs to re-simulate instead of an experiment
  // (experiments/cli/simulate_validation.h).
  std::vector<std::string> against;
};

CLI::App* AddSimulateCommand(CLI::App& app, SimulateOptions& options);
int RunSimulate(const SimulateOptions& options, const CLI::App& command, std::ostream& err);

// The simulator's setup for `spec`'s fabric and N: placement, TCP payload
// rates of every link, the shards' sites, alpha, the host cost, slow ranks.
SimSetup SimSetupOf(const proto::ExperimentSpec& spec);

// One (algorithm, size) of `spec` (one N: spec.workers()) simulated into the
// row a run would have reported, model time included. `wall_s` gets the
// simulator's own time. With spec.record_rounds the row carries every
// rank's round ends (up to kMaxTimelineRanks ranks, common/limits.h), as a
// measured row does: experiments/results/row_timeline.h draws either.
absl::StatusOr<proto::ResultRow> SimulateRow(const proto::ExperimentSpec& spec,
                                             const std::string& algorithm, std::int64_t bytes,
                                             double* wall_s = nullptr);

// The same under the spec's split: one row per group, all of them on the
// fabric at once (proto/result_aggregator.h's AggregateRows); SimulateRow
// refuses a split that makes several.
absl::StatusOr<std::vector<proto::ResultRow>> SimulateRows(const proto::ExperimentSpec& spec,
                                                           const std::string& algorithm,
                                                           std::int64_t bytes,
                                                           double* wall_s = nullptr);

}  // namespace testbed
