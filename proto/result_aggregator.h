// Turns the N per-rank measurements of one (algorithm, size) into the row
// people read: the collective's time in an iteration is its slowest rank's;
// payload is what the transports counted; theory is the closed form of docs/design.md.
// The coordinator (server/coordinator_core.cc) makes measured rows with it and
// `testbed simulate` (experiments/cli/simulate_command.cc) simulated ones, so
// both are the same row.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/experiment.pb.h"

namespace testbed {

// `by_rank` holds exactly spec.workers() results, one per rank, all for the
// same algorithm and size, each with the same number of iterations.
absl::StatusOr<proto::ResultRow> AggregateRow(const proto::ExperimentSpec& spec,
                                              const std::vector<proto::RankResult>& by_rank);

// ", group 2 of 4 (div:2)" for a row of a split of `groups` groups; empty
// without a split: what progress lines add after the row's name.
std::string GroupLabel(const proto::ResultRow& row, std::size_t groups);

// The rows of the spec's split (proto/spec.h's GroupsOf): one per group, in
// group order, each over its members' results, with `workers` the group's
// size; one row, AggregateRow's, without a split. AggregateRow refuses a
// spec whose split makes several.
absl::StatusOr<std::vector<proto::ResultRow>> AggregateRows(
    const proto::ExperimentSpec& spec, const std::vector<proto::RankResult>& by_rank);

}  // namespace testbed
