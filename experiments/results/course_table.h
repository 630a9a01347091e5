// The table of the course notes, from measured results: for each N and
// message size M, one row per algorithm - total traffic (measured / formula),
// what the wire carried, rounds, time (measured / predicted by the link model
// / predicted by the model fitted to the same file), and the bottleneck link.
// Markdown, so it pastes into notes, slides and issues. `testbed local --out
// X.jsonl` writes it beside the results as X.md; `testbed report`
// (experiments/cli/report_command.h) prints it.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/experiment.pb.h"

namespace testbed {

// Which link limits the algorithm and what it carries, in the notes' words.
std::string BottleneckDescription(const std::string& algorithm);

// The Markdown for `rows` (later rows replace earlier ones of the same
// algorithm, transport, N and M). Fails when there are no rows.
absl::Status PrintCourseTable(const std::vector<proto::ResultRow>& rows, std::ostream& out);

// "results.jsonl" -> "results.md" (any other name gets ".md" appended).
std::string CourseTablePathFor(const std::string& results_path);

// Reads a results file, writes its course table to `markdown_path`.
absl::Status WriteCourseTable(const std::string& results_path, const std::string& markdown_path);

}  // namespace testbed
