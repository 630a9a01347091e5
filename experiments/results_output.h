// Result rows as people and plots read them: the columns of the table, CSV
// and JSON outputs, and the JSON-lines results file, whose first record holds
// the spec, the git revision and the host, so a figure can be rebuilt.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "experiments/table.h"
#include "proto/experiment.pb.h"

namespace testbed {

std::vector<std::string> ResultColumns();
// The columns a terminal table shows (CSV and JSON carry all of them); the
// parameter server's, the wire and the model columns only when some row has them.
std::vector<std::string> TableColumns(bool any_ps, bool any_wire, bool any_model);
std::vector<Cell> ResultCells(const proto::ResultRow& row);

// Appends to a JSON-lines file: Open() writes the experiment record, Append()
// one result record per row, flushed at once so a crash keeps what was measured.
class ResultsFile {
 public:
  absl::Status Open(const std::string& path, const proto::ExperimentSpec& spec,
                    const std::string& deployment);
  void Append(const proto::ResultRow& row);
  bool is_open() const { return out_.is_open(); }

 private:
  std::ofstream out_;
};

}  // namespace testbed
