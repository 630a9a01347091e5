#include "common/signal_waiter.h"

#include <pthread.h>

namespace testbed {

SignalWaiter::SignalWaiter(std::function<void(int)> on_signal) {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGUSR1);  // our own wake-up, for the destructor
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  thread_ = std::thread([this, on_signal = std::move(on_signal)] {
    int signal = 0;
    sigwait(&signals_, &signal);
    if (signal != SIGUSR1) on_signal(signal);
  });
}

SignalWaiter::~SignalWaiter() {
  pthread_kill(thread_.native_handle(), SIGUSR1);
  thread_.join();
}

}  // namespace testbed
