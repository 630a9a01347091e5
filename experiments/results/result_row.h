// ResultRow, the one definition of a result, as every output and reader sees
// it: the columns of the table, CSV and JSON are the message's fields in
// field-number order (read from its descriptor, so a field added to the proto
// is a column everywhere), and results files are read back with protobuf's
// own JSON parser.
//
// Thread-safety: free functions over values.
#pragma once

#include <cstddef>
#include <istream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "allreduce/cost_model.h"
#include "experiments/results/json_lines.h"  // kMaxResultsLineBytes
#include "experiments/results/table.h"
#include "proto/experiment.pb.h"
#include "proto/spec.h"  // SpecReader, MaxWorkers

namespace testbed {

// Every field's name, in field-number order.
std::vector<std::string> ResultColumns();
// One cell per column: integers, doubles, strings, lists of integers; an
// unset optional field is an empty string.
std::vector<Cell> ResultCells(const proto::ResultRow& row);

// The alpha-beta model's estimate for a row: its algorithm at its N, M,
// shards (at least one) and dtype (float32 when absent). An unknown
// algorithm or dtype is an error naming it.
absl::StatusOr<CostEstimate> EstimateRow(const proto::ResultRow& row, const LinkModel& link);

// A results-file line of the "result" kind, as JSON (no newline).
std::string ResultRecordJson(const proto::ResultRow& row);

// The "result" records of JSON lines; other records and blank lines are
// skipped, unknown fields ignored (files from newer builds still read). A
// record without algorithm, workers >= 1 or bytes, one whose workers,
// servers, bytes, iterations or shard lists exceed common/limits.h (refused
// before anything is computed from it), a malformed line or one over
// kMaxResultsLineBytes (json_lines.h) fails with its line number. Workers
// are held to MaxWorkers(reader): rows a daemon run fits its choice to
// (--tuning, `testbed fit`) are read as SpecReader::kCli, so a simulated
// row of 8,192 ranks cannot make a fit build schedules that large; reports
// read simulated rows too.
absl::StatusOr<std::vector<proto::ResultRow>> ReadResultRows(
    std::istream& in, SpecReader reader = SpecReader::kSimulator);

// The result records of several files, in order; errors name the file. Only
// regular files are read (a device such as /dev/zero never ends).
absl::StatusOr<std::vector<proto::ResultRow>> ReadResultsFiles(
    const std::vector<std::string>& files, SpecReader reader = SpecReader::kSimulator);

// An experiment record of a results file and the result records after it
// (up to the next experiment record): the spec each row was measured under.
struct RecordedRun {
  proto::ExperimentSpec spec;
  std::string deployment;
  std::vector<proto::ResultRow> rows;
};
// The runs of several files, in order, read as ReadResultsFiles reads rows;
// a result record before any experiment record is an error.
absl::StatusOr<std::vector<RecordedRun>> ReadRecordedRuns(const std::vector<std::string>& files);

}  // namespace testbed
