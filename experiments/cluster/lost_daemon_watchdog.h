// Watches a LocalCluster while a submission to its coordinator is in flight.
// When a daemon dies on its own, the coordinator names the lost rank and ends
// the run; should no verdict come within the grace (the coordinator itself
// died), the watchdog gives up on the submission through `give_up` (which
// cancels it). `testbed local` and `testbed train` on daemons both use it.
//
// Thread-safety: its own thread polls the cluster (UnexpectedExits() may be
// called from any thread) and calls `give_up` at most once; Stop() and the
// destructor belong to the thread that made it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "experiments/cluster/local_cluster.h"

namespace testbed {

class LostDaemonWatchdog {
 public:
  // How long after the first unexpected exit the coordinator has to say so.
  static constexpr std::chrono::seconds kGrace{15};

  // Starts watching; `cluster` must outlive the watchdog (or its Stop()).
  LostDaemonWatchdog(const LocalCluster& cluster, std::function<void()> give_up);
  ~LostDaemonWatchdog();  // Stop()

  LostDaemonWatchdog(const LostDaemonWatchdog&) = delete;
  LostDaemonWatchdog& operator=(const LostDaemonWatchdog&) = delete;

  // Stops watching, within one poll (200 ms). Idempotent.
  void Stop();

 private:
  void Watch(const LocalCluster& cluster, const std::function<void()>& give_up);

  std::atomic<bool> finished_{false};  // before thread_: the thread reads it
  std::thread thread_;
};

}  // namespace testbed
