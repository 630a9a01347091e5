#include "experiments/cli/fabric_flags.h"

#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/limits.h"
#include "common/link_units.h"
#include "experiments/cli/setting_flags.h"
#include "experiments/cli/spec_file.h"
#include "proto/fabric_spec.h"

namespace testbed {
namespace {

// "3=25mbit" -> worker 3 and "25mbit"; `example` shows the form in the refusal.
absl::StatusOr<std::pair<std::uint32_t, std::string>> SplitWorkerValue(std::string_view text,
                                                                       const char* example) {
  const std::string owned(text);
  const std::vector<std::string> parts = absl::StrSplit(owned, absl::MaxSplits('=', 1));
  std::uint32_t worker = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &worker)) {
    return absl::InvalidArgumentError(absl::StrCat("write ", example, ", not '", owned, "'"));
  }
  return std::pair{worker, parts[1]};
}

// "3=25mbit": worker 3's host link at 25 Mbit/s.
absl::StatusOr<proto::HostLink> ParseHostLink(std::string_view text) {
  const auto split = SplitWorkerValue(text, "WORKER=RATE (3=25mbit)");
  if (!split.ok()) return split.status();
  absl::StatusOr<std::uint64_t> rate = ParseLinkRateBps(split->second);
  if (!rate.ok()) return rate.status();
  proto::HostLink link;
  link.set_worker(split->first);
  link.set_link_rate_bps(*rate);
  return link;
}

// "1=20ms": worker 1 starts each collective 20 ms late.
absl::StatusOr<proto::SlowRank> ParseSlowRank(std::string_view text) {
  const auto split = SplitWorkerValue(text, "WORKER=DURATION (1=20ms)");
  if (!split.ok()) return split.status();
  absl::StatusOr<double> seconds = ParseDuration(split->second);
  if (!seconds.ok()) return seconds.status();
  proto::SlowRank slow;
  slow.set_worker(split->first);
  slow.set_delay_us(static_cast<std::uint64_t>(std::llround(*seconds * 1e6)));
  return slow;
}

absl::StatusOr<double> ParseRatio(std::string_view text) {
  double ratio = 0;
  if (!absl::SimpleAtod(std::string(text), &ratio) || !(ratio > 0) || ratio > 1e6) {
    return absl::InvalidArgumentError(
        absl::StrCat("an oversubscription is a ratio above 0 (4 for 4:1), not '",
                     std::string(text), "'"));
  }
  return ratio;
}

}  // namespace

void AddFabricFlags(CLI::App& cmd, FabricFlags& f) {
  cmd.add_option("--fabric", f.file,
                 "Racks, uplinks, placement and slower host links in protobuf text format "
                 "(experiments/fabrics/*.textproto; docs/fabrics.md); the flags below override "
                 "its fields. Default: one flat switch")
      ->check(CLI::ExistingFile);
  cmd.add_option_function<std::uint32_t>(
         "--racks", [&f](std::uint32_t racks) { f.given.set_racks(racks); },
         "Racks the workers sit in, each behind one uplink to a spine (1: the flat switch)")
      ->check(CLI::Range(1, kMaxSimulatedWorkers));
  cmd.add_option_function<std::uint32_t>(
         "--hosts-per-rack", [&f](std::uint32_t hosts) { f.given.set_hosts_per_rack(hosts); },
         "Hosts in each rack (default: the workers dealt evenly over the racks)")
      ->check(CLI::Range(1, kMaxSimulatedWorkers));
  AddParsedOption(cmd, "--oversubscription",
                  "Each rack's bandwidth over its uplink's: 4 gives a rack of k hosts at the "
                  "link rate an uplink of k x rate / 4",
                  "RATIO", [&f](const std::string& text) -> std::string {
                    absl::StatusOr<double> ratio = ParseRatio(text);
                    if (!ratio.ok()) return std::string(ratio.status().message());
                    f.given.set_oversubscription(*ratio);
                    ++f.uplink_flags;
                    return "";
                  });
  AddParsedOption(cmd, "--uplink-rate", "Each rack's uplink rate, both directions (1gbit)",
                  "RATE", [&f](const std::string& text) -> std::string {
                    absl::StatusOr<std::uint64_t> rate = ParseLinkRateBps(text);
                    if (!rate.ok()) return std::string(rate.status().message());
                    f.given.set_uplink_rate_bps(*rate);
                    ++f.uplink_flags;
                    return "";
                  });
  f.placement_option = AddEnumFlag(cmd, "--placement", f.placement,
                                   "How ranks sit in racks: packed (rack by rack) or "
                                   "round-robin (rank r in rack r mod racks)");
  f.server_placement_option = AddEnumFlag(
      cmd, "--server-placement", f.server_placement,
      "Where ps's shards run: spine (dedicated hosts, each behind its own link: BytePS's k "
      "dedicated servers) or colocated (shard s on worker s's host)");
  AddParsedOption(cmd, "--slow-rank",
                  "A rank that starts every collective late, as a slower compute would: "
                  "WORKER=DURATION (1=20ms) after each iteration's barrier, outside its own "
                  "timer; repeat for more",
                  "WORKER=DURATION", [&f](const std::string& text) -> std::string {
                    absl::StatusOr<proto::SlowRank> slow = ParseSlowRank(text);
                    if (!slow.ok()) return std::string(slow.status().message());
                    *f.given.add_slow_ranks() = *slow;
                    return "";
                  })
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  AddParsedOption(cmd, "--link-queue",
                  "How long a packet may wait in each shaped link's queue before it is dropped "
                  "(a switch port's buffer, as time at the link's rate): 1ms .. 10s; netns "
                  "only (default 20ms)",
                  "DURATION", [&f](const std::string& text) -> std::string {
                    absl::StatusOr<double> seconds = ParseDuration(text);
                    if (!seconds.ok()) return std::string(seconds.status().message());
                    f.given.set_link_queue_us(
                        static_cast<std::uint64_t>(std::llround(*seconds * 1e6)));
                    return "";
                  });
  AddParsedOption(cmd, "--host-link",
                  "A slower (or faster) link for one worker's host, WORKER=RATE (3=25mbit); "
                  "repeat for more",
                  "WORKER=RATE", [&f](const std::string& text) -> std::string {
                    absl::StatusOr<proto::HostLink> link = ParseHostLink(text);
                    if (!link.ok()) return std::string(link.status().message());
                    *f.given.add_host_links() = *link;
                    return "";
                  })
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

absl::StatusOr<proto::Fabric> BuildFabric(const FabricFlags& f, proto::Fabric base) {
  if (f.uplink_flags > 1) {
    return absl::InvalidArgumentError("give --uplink-rate or --oversubscription, not both");
  }
  if (!f.file.empty()) {
    base.Clear();
    if (absl::Status st = ReadSpecFileInto(f.file, base, "fabric"); !st.ok()) return st;
  }
  if (f.given.racks() != 0) base.set_racks(f.given.racks());
  if (f.given.hosts_per_rack() != 0) base.set_hosts_per_rack(f.given.hosts_per_rack());
  if (f.given.has_uplink_rate_bps()) base.set_uplink_rate_bps(f.given.uplink_rate_bps());
  if (f.given.has_oversubscription()) base.set_oversubscription(f.given.oversubscription());
  if (f.placement_option != nullptr && f.placement_option->count() > 0) {
    base.set_placement(f.placement);
  }
  if (f.server_placement_option != nullptr && f.server_placement_option->count() > 0) {
    base.set_server_placement(f.server_placement);
  }
  if (f.given.link_queue_us() != 0) base.set_link_queue_us(f.given.link_queue_us());
  for (const proto::HostLink& link : f.given.host_links()) *base.add_host_links() = link;
  for (const proto::SlowRank& slow : f.given.slow_ranks()) *base.add_slow_ranks() = slow;
  return base;
}

absl::StatusOr<proto::Fabric> FabricFor(const FabricFlags& flags, int workers) {
  absl::StatusOr<proto::Fabric> fabric = BuildFabric(flags);
  if (!fabric.ok()) return fabric.status();
  if (absl::Status st = ValidateFabric(*fabric, workers); !st.ok()) return st;
  return fabric;
}

}  // namespace testbed
