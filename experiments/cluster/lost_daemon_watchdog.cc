#include "experiments/cluster/lost_daemon_watchdog.h"

#include <optional>
#include <utility>

namespace testbed {

LostDaemonWatchdog::LostDaemonWatchdog(const LocalCluster& cluster,
                                       std::function<void()> give_up)
    : thread_([this, &cluster, give_up = std::move(give_up)] { Watch(cluster, give_up); }) {}

LostDaemonWatchdog::~LostDaemonWatchdog() { Stop(); }

void LostDaemonWatchdog::Stop() {
  finished_ = true;
  if (thread_.joinable()) thread_.join();
}

void LostDaemonWatchdog::Watch(const LocalCluster& cluster,
                               const std::function<void()>& give_up) {
  std::optional<std::chrono::steady_clock::time_point> first_exit;
  while (!finished_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (cluster.UnexpectedExits().empty()) continue;
    if (!first_exit) first_exit = std::chrono::steady_clock::now();
    if (std::chrono::steady_clock::now() - *first_exit > kGrace) {
      give_up();
      return;
    }
  }
}

}  // namespace testbed
