// Turns SIGTERM and SIGINT into a callback on an ordinary thread, so a daemon
// can shut its gRPC server down cleanly (signal handlers may not call gRPC).
// Construct it first thing in main(), before any thread starts: it blocks the
// signals in the constructing thread, and threads inherit that.
#pragma once

#include <csignal>
#include <functional>
#include <thread>

namespace testbed {

class SignalWaiter {
 public:
  // `on_signal` runs once, on the waiter's thread, with the signal number.
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
