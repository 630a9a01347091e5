// Result rows as people and plots read them: the columns of the table, CSV
// and JSON outputs, and the JSON-lines results file, whose first record holds
// the spec, the git revision and the host, so a figure can be rebuilt.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "experiments/results/result_row.h"
#include "experiments/results/table.h"
#include "proto/experiment.pb.h"

namespace testbed {

// The columns a terminal table shows for `rows` (CSV and JSON carry all of
// them); the parameter server's, the wire, the model, the segment and the
// memory columns only when some row has them.
std::vector<std::string> TableColumns(const std::vector<proto::ResultRow>& rows);

// Appends to a JSON-lines file: Open() writes the experiment record, Append()
// one result record per row, each flushed at once so a crash keeps what was
// measured. A failed write (a full disk, /dev/full) is an error naming the
// path and the system's reason.
class ResultsFile {
 public:
  ResultsFile() = default;
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;
  ~ResultsFile();

  absl::Status Open(const std::string& path, const proto::ExperimentSpec& spec,
                    const std::string& deployment);
  absl::Status Append(const proto::ResultRow& row);
  bool is_open() const { return file_ != nullptr; }

 private:
  absl::Status Write(const std::string& line);

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace testbed
