// What `testbed local` and `testbed run` share once they have a coordinator:
// submitting the spec, printing and recording its rows, Ctrl-C, exit codes.
//
// Thread-safety: an Interrupter is called from a signal thread and the main
// thread; a RowSink and the functions belong to the main thread.
#pragma once

#include <functional>

#include <mutex>
#include <ostream>
#include <string>

#include <grpcpp/client_context.h>

#include "absl/status/status.h"
#include "experiments/cli/experiment_flags.h"
#include "experiments/results/result_row.h"
#include "experiments/results/results_output.h"
#include "experiments/results/table.h"
#include "proto/credentials.h"
#include "proto/experiment.pb.h"
#include "proto/tls.h"

namespace testbed {

// The exit code of an interrupted run (128 + SIGINT, as shells report it).
inline constexpr int kInterrupted = 130;

// `bytes` random bytes as hex: a job token nobody else knows.
std::string RandomHex(int bytes);

// Ctrl-C cancels whichever submission is in flight; a sweep over N makes one
// per cluster, each with its own gRPC context.
class Interrupter {
 public:
  void Interrupt() {
    std::lock_guard lock(mu_);
    interrupted_ = true;
    if (current_ != nullptr) current_->TryCancel();
  }
  // Cancels `context` now if an interrupt came before it was set.
  void SetCurrent(grpc::ClientContext* context) {
    std::lock_guard lock(mu_);
    current_ = context;
    if (interrupted_ && current_ != nullptr) current_->TryCancel();
  }
  void CancelCurrent() {
    std::lock_guard lock(mu_);
    if (current_ != nullptr) current_->TryCancel();
  }
  bool interrupted() const {
    std::lock_guard lock(mu_);
    return interrupted_;
  }

 private:
  mutable std::mutex mu_;
  bool interrupted_ = false;
  grpc::ClientContext* current_ = nullptr;
};


// Every row of a run (all N of a sweep): printed as it comes (json), kept
// for the table, appended to the results file.
class RowSink {
 public:
  explicit RowSink(const ExperimentFlags& flags)
      : format_(flags.format), table_(ResultColumns()) {}

  void Add(const proto::ResultRow& row) {
    table_.AddRow(ResultCells(row));
    rows_.push_back(row);
    if (format_ == OutputFormat::kJson) {
      std::cout << JsonObject(table_.columns(), table_.rows().back()) << std::endl;
    }
  }

  const std::vector<proto::ResultRow>& rows() const { return rows_; }

  void PrintTable() const {
    if (table_.rows().empty()) return;
    if (format_ == OutputFormat::kCsv) table_.Print(format_, std::cout);
    if (format_ == OutputFormat::kTable) {
      table_.Select(TableColumns(rows_)).Print(format_, std::cout);
    }
  }

 private:
  OutputFormat format_;
  Table table_;
  std::vector<proto::ResultRow> rows_;  // what the table's optional columns depend on
};

// Where a spec goes: the coordinator, and how to reach and describe it.
struct SubmissionTarget {
  std::string coordinator;  // HOST:PORT
  Credentials credentials;
  Tls tls;
  int wait_for_workers_s = 30;
  std::string deployment;  // recorded with the results
  // Called on each row as it arrives, before it is printed or recorded (the
  // emulated cluster adds its uplinks' counters); may be empty.
  std::function<void(proto::ResultRow&)> annotate = {};
};

// The rows `-a auto` fits its candidates to when --tuning names files: read,
// and held to the limits (ReadResultsFiles), before any daemon starts, so a
// bad file costs no cluster. No rows: auto calibrates on the daemons.
struct Tuning {
  std::vector<proto::ResultRow> rows;
  std::string source;  // "alpha-beta fitted to FILE, ..."; "" without --tuning
};
absl::StatusOr<Tuning> ReadTuning(const ExperimentFlags& flags);

// The alpha-beta model's time for `row` of `spec`, what every recorded row
// carries beside its own (model_time_us): on the spec's fabric where it has
// racks, a host link of its own or colocated shards (every link's rate
// counts), else the flat model, plus the wait for the latest rank
// (slow_ranks). Nothing without a link rate.
void AddModelTime(const proto::ExperimentSpec& spec, proto::ResultRow& row);

// Submits a spec and records its rows; "auto" among its algorithms is
// resolved first (experiments/cli/auto_algorithms.h), from `tuning`'s rows or
// a calibration run, and may take several submissions. An error is returned
// as a status.
absl::Status SubmitAndRecord(const ExperimentFlags& flags, const proto::ExperimentSpec& spec,
                             const SubmissionTarget& target, const Tuning& tuning,
                             Interrupter& interrupter, RowSink& sink);

// Whether --out (if given) can be appended to; says why not. Checked before
// anything starts, so a typo costs no run.
bool CanWriteResults(const std::string& out);

// With --timeline, the sink's rows drawn into that file (rows without round
// ends, as from a run that failed before them, are left out), saying so on
// `err`; false if it could not be written. True without --timeline.
bool WriteTimelineIfAsked(const ExperimentFlags& flags, const proto::ExperimentSpec& spec,
                          const RowSink& sink, const std::string& about, std::ostream& err);

// The exit code for a submission's status.
int ExitCode(const absl::Status& status, const Interrupter& interrupter);

}  // namespace testbed
