// The training tradeoffs table, from `testbed train --out` rows: for each
// link, model and N, one line per synchronisation scheme - the step time split
// into compute, exposed and hidden communication, worker 0's bytes, what the
// alpha-beta model's bandwidth term says the gradient's synchronisation needs
// on the run's link (the registry's closed forms: 2NM through the server,
// N(N-1)M for naive, 2(N-1)M for the ring), and how far each scheme is from
// the fastest. A summary names the fastest scheme per link, model and N.
// Markdown, as the course table (course_table.h); `testbed report` prints
// both from whatever rows its files hold.
//
// Thread-safety: free functions over values.
#pragma once

#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/training.pb.h"

namespace testbed {

// The TrainingRows ("kind": "PROGRESS" or "RUN") of JSON lines, in order;
// other lines (an experiment's result records) and blank lines are skipped,
// unknown fields ignored. A malformed line fails with its line number.
absl::StatusOr<std::vector<proto::TrainingRow>> ReadTrainingRows(std::istream& in);

// The rows of several files, in order; errors name the file.
absl::StatusOr<std::vector<proto::TrainingRow>> ReadTrainingFiles(
    const std::vector<std::string>& files);

// The Markdown for `rows` as `testbed train` writes them (a run's PROGRESS
// rows, then its RUN row). Each run is measured by its last progress interval
// (the steady steps: the first interval carries the connections' set-up) or,
// with none, by its RUN row; a later run of the same link, model, N and
// scheme replaces an earlier one. Fails when there are no RUN rows.
absl::Status PrintTrainingTable(const std::vector<proto::TrainingRow>& rows, std::ostream& out);

}  // namespace testbed
