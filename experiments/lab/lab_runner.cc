#include "experiments/lab/lab_runner.h"

#include <algorithm>
#include <streambuf>

#include "absl/strings/str_cat.h"

namespace testbed {

std::string_view Name(RunState state) {
  switch (state) {
    case RunState::kQueued: return "queued";
    case RunState::kRunning: return "running";
    case RunState::kDone: return "done";
    case RunState::kFailed: return "failed";
  }
  return "unknown";
}

// Cuts what the executor writes into lines and appends each to the run's
// progress under the runner's lock, so pages see them while the run goes on.
class LabRunner::ProgressBuffer : public std::streambuf {
 public:
  ProgressBuffer(LabRunner& runner, int id) : runner_(runner), id_(id) {}
  ~ProgressBuffer() override { Flush(); }

 protected:
  int_type overflow(int_type c) override {
    if (c == traits_type::eof()) return c;
    if (c == '\n') {
      Flush();
    } else {
      line_.push_back(static_cast<char>(c));
    }
    return c;
  }

 private:
  void Flush() {
    if (line_.empty()) return;
    std::lock_guard lock(runner_.mu_);
    runner_.runs_[id_].progress.push_back(std::move(line_));
    line_.clear();
  }

  LabRunner& runner_;
  int id_;
  std::string line_;
};

LabRunner::LabRunner(LabExecutor executor, int max_queued)
    : executor_(std::move(executor)), max_queued_(max_queued), thread_([this] { Loop(); }) {}

LabRunner::~LabRunner() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

absl::StatusOr<int> LabRunner::Enqueue(proto::ExperimentSpec spec) {
  int id = 0;
  {
    std::lock_guard lock(mu_);
    if (static_cast<int>(queue_.size()) >= max_queued_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the lab's queue is full: ", max_queued_,
          " runs are waiting already; try again when one has run"));
    }
    id = next_id_++;
    runs_[id] = LabRun{.id = id, .spec = std::move(spec)};
    queue_.push_back(id);
  }
  wake_.notify_all();
  return id;
}

std::optional<LabRun> LabRunner::Get(int id) const {
  std::lock_guard lock(mu_);
  const auto it = runs_.find(id);
  if (it == runs_.end()) return std::nullopt;
  return it->second;
}

int LabRunner::QueuedAhead(int id) const {
  std::lock_guard lock(mu_);
  const auto it = std::find(queue_.begin(), queue_.end(), id);
  return it == queue_.end() ? 0 : static_cast<int>(it - queue_.begin());
}

std::vector<proto::ResultRow> LabRunner::AllRows() const {
  std::lock_guard lock(mu_);
  std::vector<proto::ResultRow> rows;
  for (const auto& [id, run] : runs_) rows.insert(rows.end(), run.rows.begin(), run.rows.end());
  return rows;
}

void LabRunner::Loop() {
  while (true) {
    int id = 0;
    proto::ExperimentSpec spec;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      id = queue_.front();
      queue_.pop_front();
      runs_[id].state = RunState::kRunning;
      spec = runs_[id].spec;
    }
    absl::Status status;
    {
      ProgressBuffer buffer(*this, id);
      std::ostream progress(&buffer);
      status = executor_(
          spec,
          [&](const proto::ResultRow& row) {
            std::lock_guard lock(mu_);
            runs_[id].rows.push_back(row);
          },
          progress);
    }
    std::lock_guard lock(mu_);
    runs_[id].state = status.ok() ? RunState::kDone : RunState::kFailed;
    runs_[id].error = std::string(status.message());
  }
}

}  // namespace testbed
