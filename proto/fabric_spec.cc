#include "proto/fabric_spec.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "allreduce/chunking.h"
#include "common/link_units.h"
#include "common/limits.h"

namespace testbed {
namespace {

constexpr std::uint64_t kMaxRankDelayMicros = 60'000'000;  // a minute per iteration
constexpr std::uint64_t kDefaultLinkQueueMicros = 20'000;   // a switch-like buffer
constexpr std::uint64_t kMinLinkQueueMicros = 1'000;
constexpr std::uint64_t kMaxLinkQueueMicros = 10'000'000;

template <typename... Parts>
absl::Status Bad(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat("bad fabric: ", parts...));
}

bool Flat(const proto::Fabric& fabric) { return fabric.racks() <= 1; }

// Workers per rack, in rack order.
std::vector<int> RackSizes(const proto::Fabric& fabric, int workers) {
  const int racks = static_cast<int>(fabric.racks());
  std::vector<int> sizes;
  if (fabric.hosts_per_rack() == 0) {
    for (int r = 0; r < racks; ++r) sizes.push_back(static_cast<int>(ChunkOf(workers, racks, r).count));
    return sizes;
  }
  const int hosts = static_cast<int>(fabric.hosts_per_rack());
  if (fabric.placement() == proto::RankPlacement::round_robin) {
    sizes.assign(static_cast<std::size_t>(racks), 0);
    for (int rank = 0; rank < workers; ++rank) ++sizes[static_cast<std::size_t>(rank % racks)];
    return sizes;
  }
  for (int r = 0, left = workers; r < racks; ++r, left -= hosts) {
    sizes.push_back(std::max(0, std::min(hosts, left)));
  }
  return sizes;
}

}  // namespace

absl::Status ValidateFabric(const proto::Fabric& fabric, int workers) {
  if (fabric.racks() > static_cast<std::uint32_t>(kMaxSimulatedWorkers)) {
    return Bad("racks ", fabric.racks(), " is over the limit of ", kMaxSimulatedWorkers,
               " (common/limits.h)");
  }
  if (fabric.hosts_per_rack() > static_cast<std::uint32_t>(kMaxSimulatedWorkers)) {
    return Bad("hosts_per_rack ", fabric.hosts_per_rack(), " is over the limit of ", kMaxSimulatedWorkers,
               " (common/limits.h)");
  }
  if (fabric.racks() > static_cast<std::uint32_t>(workers)) {
    return Bad("racks ", fabric.racks(), " is more than the ", workers,
               " workers: a rack would hold none");
  }
  if (!Flat(fabric) && fabric.hosts_per_rack() > 0 &&
      std::uint64_t{fabric.racks()} * fabric.hosts_per_rack() < static_cast<std::uint64_t>(workers)) {
    return Bad("racks ", fabric.racks(), " x hosts_per_rack ", fabric.hosts_per_rack(),
               " hold fewer hosts than the ", workers, " workers");
  }
  if (!Flat(fabric)) {
    for (int size : RackSizes(fabric, workers)) {
      if (size == 0) {
        return Bad("racks ", fabric.racks(), " x hosts_per_rack ", fabric.hosts_per_rack(),
                   " leave a rack without workers at ", workers, " workers; use fewer racks");
      }
    }
  }
  if (fabric.uplink_case() == proto::Fabric::kOversubscription &&
      !(fabric.oversubscription() > 0 && std::isfinite(fabric.oversubscription()))) {
    return Bad("oversubscription ", fabric.oversubscription(), " is not a ratio above 0");
  }
  if (fabric.uplink_case() != proto::Fabric::UPLINK_NOT_SET && Flat(fabric)) {
    return Bad("an uplink needs racks: set racks to 2 or more");
  }
  if (fabric.link_queue_us() != 0 && (fabric.link_queue_us() < kMinLinkQueueMicros ||
                                      fabric.link_queue_us() > kMaxLinkQueueMicros)) {
    return Bad("link_queue_us must be ", kMinLinkQueueMicros, " .. ", kMaxLinkQueueMicros,
               " (1 ms .. 10 s), not ", fabric.link_queue_us());
  }
  for (const proto::SlowRank& slow : fabric.slow_ranks()) {
    if (slow.worker() >= static_cast<std::uint32_t>(workers)) {
      return Bad("slow_ranks names worker ", slow.worker(), ", outside 0..", workers - 1);
    }
    if (slow.delay_us() == 0 || slow.delay_us() > kMaxRankDelayMicros) {
      return Bad("slow_ranks of worker ", slow.worker(), " needs a delay_us of 1 .. ",
                 kMaxRankDelayMicros, " (60 s), not ", slow.delay_us());
    }
  }
  for (const proto::HostLink& link : fabric.host_links()) {
    if (link.worker() >= static_cast<std::uint32_t>(workers)) {
      return Bad("host_links names worker ", link.worker(), ", outside 0..", workers - 1);
    }
    if (link.link_rate_bps() == 0) {
      return Bad("host_links of worker ", link.worker(), " needs a link_rate_bps above 0");
    }
  }
  return absl::OkStatus();
}

Placement PlacementOf(const proto::Fabric& fabric, int workers) {
  if (Flat(fabric)) return Placement::Flat();
  const std::vector<int> sizes = RackSizes(fabric, workers);
  return fabric.placement() == proto::RankPlacement::round_robin ? Placement::RoundRobin(sizes)
                                                                 : Placement::Packed(sizes);
}

LinkRates LinkRatesOf(const proto::Fabric& fabric, int workers, double host_link_bps) {
  LinkRates rates;
  rates.host_bps.assign(static_cast<std::size_t>(workers), host_link_bps);
  for (const proto::HostLink& link : fabric.host_links()) {
    // Unchecked against these workers (ValidateFabric): ignored, never written past the end.
    if (link.worker() >= rates.host_bps.size()) continue;
    rates.host_bps[link.worker()] = static_cast<double>(link.link_rate_bps());
  }
  if (Flat(fabric)) return rates;
  for (int size : RackSizes(fabric, workers)) {
    switch (fabric.uplink_case()) {
      case proto::Fabric::kUplinkRateBps:
        rates.uplink_bps.push_back(static_cast<double>(fabric.uplink_rate_bps()));
        break;
      case proto::Fabric::kOversubscription:
        rates.uplink_bps.push_back(size * host_link_bps / fabric.oversubscription());
        break;
      case proto::Fabric::UPLINK_NOT_SET: rates.uplink_bps.push_back(0); break;
    }
  }
  return rates;
}

std::uint64_t RankDelayMicros(const proto::Fabric& fabric, int rank) {
  std::uint64_t delay = 0;
  for (const proto::SlowRank& slow : fabric.slow_ranks()) {
    if (static_cast<int>(slow.worker()) == rank) delay = std::max(delay, slow.delay_us());
  }
  return delay;
}

std::uint64_t LongestRankDelayMicros(const proto::Fabric& fabric) {
  std::uint64_t delay = 0;
  for (const proto::SlowRank& slow : fabric.slow_ranks()) delay = std::max(delay, slow.delay_us());
  return delay;
}

std::uint64_t LinkQueueMicros(const proto::Fabric& fabric) {
  return fabric.link_queue_us() == 0 ? kDefaultLinkQueueMicros : fabric.link_queue_us();
}

ServerSites ServerSitesOf(const proto::Fabric& fabric, double link_bps) {
  return {link_bps, fabric.server_placement() == proto::ServerPlacement::colocated};
}

std::string FabricSummary(const proto::Fabric& fabric) {
  std::string servers =
      fabric.server_placement() == proto::ServerPlacement::colocated ? ", servers colocated" : "";
  for (const proto::HostLink& link : fabric.host_links()) {
    absl::StrAppend(&servers, ", worker ", link.worker(), "'s link ",
                    FormatLinkRate(link.link_rate_bps()));
  }
  for (const proto::SlowRank& slow : fabric.slow_ranks()) {
    absl::StrAppend(&servers, ", worker ", slow.worker(), " ", slow.delay_us(), " us late");
  }
  if (fabric.link_queue_us() != 0) {
    absl::StrAppend(&servers, ", ", fabric.link_queue_us() / 1000.0, " ms link queues");
  }
  if (Flat(fabric)) return "flat" + servers;
  std::string text = absl::StrCat(fabric.racks(), " racks");
  if (fabric.hosts_per_rack() > 0) absl::StrAppend(&text, " x ", fabric.hosts_per_rack());
  switch (fabric.uplink_case()) {
    case proto::Fabric::kUplinkRateBps:
      absl::StrAppend(&text, ", ", FormatLinkRate(fabric.uplink_rate_bps()),
                      " uplinks");
      break;
    case proto::Fabric::kOversubscription:
      absl::StrAppend(&text, ", ", fabric.oversubscription(), ":1 uplinks");
      break;
    case proto::Fabric::UPLINK_NOT_SET: absl::StrAppend(&text, ", unlimited uplinks"); break;
  }
  absl::StrAppend(&text, ", ", fabric.placement() == proto::RankPlacement::round_robin
                                   ? "round-robin"
                                   : "packed");
  return text + servers;
}

}  // namespace testbed
