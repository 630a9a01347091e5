// The lab's queue of experiments: a page posts one (collective, N, size), the
// runner runs them one at a time on its own thread - each through an
// executor, in `testbed lab` a LocalCluster (lab_cluster.h) - and keeps every
// run's progress lines, rows and error for the pages that poll it, and every
// row of the session for the course table.
//
// Thread-safety: every public method may be called from any thread (the
// HTTP server's pool); the executor runs on the runner's thread only.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/experiment.pb.h"

namespace testbed {

// Runs one spec: hands each row to `on_row`, writes progress lines to
// `progress`, returns the harness's error if it failed.
using LabExecutor = std::function<absl::Status(
    const proto::ExperimentSpec& spec, const std::function<void(const proto::ResultRow&)>& on_row,
    std::ostream& progress)>;

enum class RunState { kQueued, kRunning, kDone, kFailed };
std::string_view Name(RunState state);

struct LabRun {
  int id = 0;
  proto::ExperimentSpec spec{};
  RunState state = RunState::kQueued;
  std::vector<std::string> progress{};  // the harness's lines, as they came
  std::vector<proto::ResultRow> rows{};
  std::string error{};                  // the harness's message when failed
};

// Runs that may wait behind the one running: a classroom's worth of clicks,
// not an unbounded pile of requests (docs/lab.md, "Limits").
inline constexpr int kMaxQueuedLabRuns = 16;

class LabRunner {
 public:
  explicit LabRunner(LabExecutor executor, int max_queued = kMaxQueuedLabRuns);
  // Finishes the run in progress (queued ones are dropped), joins the thread.
  ~LabRunner();
  LabRunner(const LabRunner&) = delete;
  LabRunner& operator=(const LabRunner&) = delete;

  // Queues `spec`; returns its id. With `max_queued` runs waiting already it
  // is refused (ResourceExhausted, one line saying so) and nothing is kept.
  absl::StatusOr<int> Enqueue(proto::ExperimentSpec spec);
  // A copy of run `id` as it stands; nullopt if there is none.
  std::optional<LabRun> Get(int id) const;
  // Runs queued ahead of `id` (0 when it runs or ran).
  int QueuedAhead(int id) const;
  // Every row of every run so far, in order.
  std::vector<proto::ResultRow> AllRows() const;

 private:
  class ProgressBuffer;
  void Loop();

  LabExecutor executor_;
  const int max_queued_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::map<int, LabRun> runs_;  // guarded by mu_
  std::deque<int> queue_;       // guarded by mu_
  int next_id_ = 1;             // guarded by mu_
  bool stopping_ = false;       // guarded by mu_
  std::thread thread_;          // last: starts once the rest is built
};

}  // namespace testbed
