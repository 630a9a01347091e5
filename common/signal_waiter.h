// Turns SIGTERM and SIGINT into a callback on an ordinary thread, so a daemon
// can shut its gRPC server down cleanly (signal handlers may not call gRPC).
// Construct it first thing in main(), before any thread starts: it blocks the
// signals in the constructing thread, and threads inherit that. Blocked, a
// signal ends nothing by itself: computations that can run long check
// InterruptRequested() between units of work, and a second signal, for a
// process whose clean-up hangs, ends it at once (128 + the signal).
#pragma once

#include <csignal>
#include <functional>
#include <thread>

namespace testbed {

// Whether a SignalWaiter of this process has received SIGINT or SIGTERM.
// Checked between units of work by what can compute for long (the cost
// model's estimates, allreduce/cost_model.cc), which then stops with
// CancelledError so the command's own clean-up runs.
bool InterruptRequested();

class SignalWaiter {
 public:
  // `on_signal` runs once, on the waiter's thread, with the signal number,
  // after InterruptRequested() turned true.
  explicit SignalWaiter(std::function<void(int)> on_signal);
  // Wakes the waiter thread (with no callback) and joins it.
  ~SignalWaiter();

  SignalWaiter(const SignalWaiter&) = delete;
  SignalWaiter& operator=(const SignalWaiter&) = delete;

 private:
  sigset_t signals_;
  std::thread thread_;
};

}  // namespace testbed
