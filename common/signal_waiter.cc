#include "common/signal_waiter.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

namespace testbed {
namespace {

std::atomic<bool> interrupt_requested{false};

}  // namespace

bool InterruptRequested() { return interrupt_requested.load(std::memory_order_relaxed); }

SignalWaiter::SignalWaiter(std::function<void(int)> on_signal) {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGUSR1);  // our own wake-up, for the destructor
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  thread_ = std::thread([this, on_signal = std::move(on_signal)] {
    int signal = 0;
    sigwait(&signals_, &signal);
    if (signal == SIGUSR1) return;
    interrupt_requested.store(true, std::memory_order_relaxed);
    on_signal(signal);
    // The clean-up runs on the other threads; a second signal means the user
    // will not wait for it.
    sigwait(&signals_, &signal);
    if (signal == SIGUSR1) return;
    static constexpr char kNow[] = "second signal: exiting now, without cleaning up\n";
    (void)!write(STDERR_FILENO, kNow, sizeof kNow - 1);
    std::_Exit(128 + signal);
  });
}

SignalWaiter::~SignalWaiter() {
  pthread_kill(thread_.native_handle(), SIGUSR1);
  thread_.join();
}

}  // namespace testbed
