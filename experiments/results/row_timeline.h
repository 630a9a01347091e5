// A result row's timeline: the round ends its ranks reported
// (ResultRow.rank_round_end_us, with ExperimentSpec.record_rounds) drawn as the
// tracks of a trace (experiments/results/timeline.h). Measured and simulated
// rows are drawn by the same code, so the two open side by side with the same
// names, peers and bytes: each rank's rounds back to back from its start (a
// compute straggler's late by its delay, proto/fabric.proto's slow_ranks),
// a span per round with steps, its peer and bytes read off the rank's
// schedule, rebuilt from the registry (it is pure data); ps's two spans, its
// push and pull phases, carry the bytes pushed and pulled.
//
// Thread-safety: free functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "experiments/results/timeline.h"
#include "proto/experiment.pb.h"

namespace testbed {

// `row` of a run of `spec` (any N of its sweep: the row's own is used).
// Ranks without round ends get no spans; slowest_rank is the rank that ended
// last in the recorded iteration.
TimelineRow TimelineOfRow(const proto::ExperimentSpec& spec, const proto::ResultRow& row);

// Every row with round ends, written to `path` as one trace, with `about`
// (the deployment) in its metadata; `*written` gets how many rows it drew.
absl::Status WriteRowTimelines(const std::string& path, const proto::ExperimentSpec& spec,
                               const std::vector<proto::ResultRow>& rows, const std::string& about,
                               int* written);

}  // namespace testbed
