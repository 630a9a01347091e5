#include "proto/result_aggregator.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "proto/enum_text.h"
#include "absl/strings/str_cat.h"
#include "allreduce/chunking.h"
#include "allreduce/collective.h"
#include "allreduce/rank_groups.h"
#include "allreduce/traffic.h"
#include "proto/fabric_spec.h"
#include "proto/spec.h"

namespace testbed {
namespace {

// Nearest rank: the smallest of `sorted` that a fraction q of them reach; 0 when empty.
double NearestRank(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

// The row's fabric and the payload that crossed racks, from the schedules and
// the placement; ps's shards sit on the spine, so each push and value crosses
// its worker's uplink.
void SetFabricTraffic(const proto::ExperimentSpec& spec, const Collective& collective,
                      const RankGroups& groups, int group, const Placement& placement,
                      std::int64_t bytes, proto::ResultRow& row) {
  const int n = groups.world_size();
  row.set_fabric(FabricSummary(spec.fabric()));
  const int racks = placement.Racks(n);
  if (racks < 2) return;
  std::vector<UplinkTraffic> uplinks(static_cast<std::size_t>(racks));
  if (collective.runs_on_parameter_server()) {
    // Worker w pushes shard s its slice and gets the slice's values back; a
    // shard on the spine is in no rack, a colocated one in its worker's.
    const bool colocated = spec.fabric().server_placement() == proto::ServerPlacement::colocated;
    const auto servers = static_cast<int>(spec.servers());
    const std::int64_t element = ElementBytes(spec);
    std::uint64_t cross = 0;
    for (int s = 0; s < servers; ++s) {
      const std::int64_t slice = ChunkOf(bytes / element, servers, s).count * element;
      const int shard_rack = colocated ? placement.RackOf(s) : -1;
      for (int w = 0; w < n; ++w) {
        const int rack = placement.RackOf(w);
        if (rack == shard_rack) continue;
        uplinks[static_cast<std::size_t>(rack)].bytes_up += slice;
        uplinks[static_cast<std::size_t>(rack)].bytes_down += slice;
        if (shard_rack >= 0) {
          uplinks[static_cast<std::size_t>(shard_rack)].bytes_up += slice;
          uplinks[static_cast<std::size_t>(shard_rack)].bytes_down += slice;
        }
        cross += 2 * static_cast<std::uint64_t>(slice);
      }
    }
    row.set_cross_rack_theory_bytes(cross);
  } else {
    const TrafficSummary t =
        CountGroupTraffic(collective, groups, group, bytes, ElementBytes(spec), 0, placement);
    uplinks = t.per_rack;
    row.set_cross_rack_theory_bytes(t.cross_rack_bytes);
  }
  for (const UplinkTraffic& u : uplinks) {
    row.add_uplink_theory_bytes_up(u.bytes_up);
    row.add_uplink_theory_bytes_down(u.bytes_down);
  }
}

// Every rank reported once, in order, the same algorithm, size and iteration count.
absl::Status CheckRanks(const proto::ExperimentSpec& spec,
                        const std::vector<proto::RankResult>& by_rank) {
  const int n = static_cast<int>(spec.workers());
  if (static_cast<int>(by_rank.size()) != n || n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(by_rank.size(), " results for ", n, " ranks"));
  }
  const proto::RankResult& first = by_rank[0];
  const int iterations = first.iteration_us_size();
  for (int r = 0; r < n; ++r) {
    const proto::RankResult& result = by_rank[r];
    if (static_cast<int>(result.rank()) != r || result.algorithm() != first.algorithm() ||
        result.bytes() != first.bytes() || result.iteration_us_size() != iterations) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", r, " reported ", result.algorithm(), "/", result.bytes(), " bytes/",
          result.iteration_us_size(), " iterations as rank ", result.rank(), "; rank 0 reported ",
          first.algorithm(), "/", first.bytes(), "/", iterations));
    }
  }

  return absl::OkStatus();
}

using Members = std::vector<const proto::RankResult*>;

// Each rank's own median, the rounds where recorded, and per iteration the
// slowest rank's time: the collective's, with its spread and bandwidths.
void SetTimes(const proto::ExperimentSpec& spec, const Collective& collective,
              const Members& members, proto::ResultRow& row) {
  const int n = static_cast<int>(members.size());
  const proto::RankResult& first = *members[0];
  const int iterations = first.iteration_us_size();
  for (const proto::RankResult* result : members) {
    std::vector<double> own(result->iteration_us().begin(), result->iteration_us().end());
    std::sort(own.begin(), own.end());
    row.add_rank_time_us_p50(static_cast<std::uint64_t>(std::llround(NearestRank(own, 0.5))));
  }
  if (spec.record_rounds()) {
    for (const proto::RankResult* result : members) {
      row.add_rank_round_counts(static_cast<std::uint32_t>(result->round_end_us_size()));
      for (double us : result->round_end_us()) {
        row.add_rank_round_end_us(static_cast<std::uint64_t>(std::llround(std::max(0.0, us))));
      }
    }
  }
  std::vector<double> times(static_cast<std::size_t>(iterations), 0.0);
  for (int i = 0; i < iterations; ++i) {
    for (const proto::RankResult* result : members) {
      times[i] = std::max(times[i], result->iteration_us(i));
    }
  }
  double sum = 0;
  for (double t : times) sum += t;
  std::sort(times.begin(), times.end());
  const double avg = iterations > 0 ? sum / iterations : 0;
  row.set_time_us_avg(avg);
  row.set_time_us_min(times.empty() ? 0 : times.front());
  row.set_time_us_p50(NearestRank(times, 0.5));
  row.set_time_us_p99(NearestRank(times, 0.99));
  row.set_time_us_max(times.empty() ? 0 : times.back());
  const double algbw = avg > 0 ? static_cast<double>(first.bytes()) / avg / 1e3 : 0;
  row.set_algbw_gbps(algbw);
  row.set_busbw_gbps(algbw * collective.busbw_factor(n));
}

// Wire bytes only when every rank had its own interface to count.
void SetWireBytes(const Members& members, proto::ResultRow& row) {
  if (!std::all_of(members.begin(), members.end(),
                   [](const proto::RankResult* r) { return r->has_wire_bytes_sent(); })) {
    return;
  }
  for (const proto::RankResult* result : members) {
    row.add_wire_bytes_sent(result->wire_bytes_sent());
    row.add_wire_bytes_received(result->wire_bytes_received());
    row.set_wire_bytes_sent_total(row.wire_bytes_sent_total() + result->wire_bytes_sent());
    row.set_wire_bytes_received_total(row.wire_bytes_received_total() +
                                      result->wire_bytes_received());
  }
}

// The bytes the ranks counted, beside their closed forms; for the parameter
// server also each shard's.
absl::Status SetTraffic(const proto::ExperimentSpec& spec, const Collective& collective,
                        const Members& members, proto::ResultRow& row) {
  const int n = static_cast<int>(members.size());
  const bool ps = collective.runs_on_parameter_server();
  std::uint64_t payload = 0, busiest = 0, staged = 0;
  std::int64_t wrong = 0;
  std::vector<std::uint64_t> per_shard(ps ? spec.servers() : 0, 0);
  for (const proto::RankResult* result : members) {
    // All-reduce bytes travel rank to rank: count each once, as sent. Parameter
    // server bytes go worker -> server and back: both directions are traffic.
    payload += result->payload_bytes_sent() + (ps ? result->payload_bytes_received() : 0);
    busiest = std::max({busiest, result->payload_bytes_sent(), result->payload_bytes_received()});
    staged += result->staged_bytes();
    wrong = (wrong < 0 || result->wrong() < 0) ? -1 : wrong + result->wrong();
    if (ps && static_cast<std::size_t>(result->shard_payload_bytes_size()) != per_shard.size()) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", result->rank(), " reported ",
                                                     result->shard_payload_bytes_size(),
                                                     " shards of ", per_shard.size()));
    }
    for (std::size_t s = 0; s < per_shard.size(); ++s) per_shard[s] += result->shard_payload_bytes(s);
  }
  row.set_payload_bytes_total(payload);
  row.set_wrong(wrong);
  row.set_staged_bytes_total(staged);
  SetWireBytes(members, row);
  const std::int64_t m = members[0]->bytes();
  row.set_theory_bytes_total(collective.formula_bytes(n, m));
  if (ps) {
    // Through each shard 2 N times its slice.
    row.set_servers(spec.servers());
    for (std::uint64_t bytes : per_shard) row.add_shard_payload_bytes(bytes);
    const std::int64_t element = ElementBytes(spec);
    for (std::uint32_t s = 0; s < spec.servers(); ++s) {
      const Chunk slice = ChunkOf(m / element, static_cast<int>(spec.servers()), static_cast<int>(s));
      row.add_shard_theory_bytes(2 * static_cast<std::uint64_t>(n) * slice.count * element);
    }
    // The busiest link is the busiest shard's: it carries N slices in and N out.
    busiest = 0;
    for (std::uint64_t bytes : per_shard) busiest = std::max(busiest, bytes / 2);
  }
  row.set_max_rank_bytes(busiest);
  return absl::OkStatus();
}

// The row of one group's ranks (`members`, in order of their index in the
// group); the world's where the spec has no split.
absl::StatusOr<proto::ResultRow> RowOfGroup(const proto::ExperimentSpec& spec,
                                            const Collective* collective, const Members& members,
                                            const RankGroups& groups, int group) {
  const int n = static_cast<int>(members.size());
  const proto::RankResult& first = *members[0];
  proto::ResultRow row;
  row.set_algorithm(first.algorithm());
  row.set_workers(n);
  row.set_bytes(first.bytes());
  row.set_iterations(first.iteration_us_size());
  row.set_dtype(EnumText(spec.dtype()));
  row.set_transport(first.transport());
  row.set_ucx_environment(first.ucx_environment());
  row.set_segment_bytes(first.segment_bytes());
  row.set_memory(first.memory());
  row.set_gpu_path(first.gpu_path());
  SetTimes(spec, *collective, members, row);
  if (absl::Status st = SetTraffic(spec, *collective, members, row); !st.ok()) return st;
  // The world's racks; the rounds are the group's on them.
  const Placement placement = PlacementOf(spec.fabric(), groups.world_size());
  row.set_rounds(collective->formula_rounds(
      n, first.bytes() / ElementBytes(spec),
      GroupPlacement(placement, groups.members[static_cast<std::size_t>(group)])));
  SetFabricTraffic(spec, *collective, groups, group, placement, first.bytes(), row);
  return row;
}

}  // namespace

absl::StatusOr<std::vector<proto::ResultRow>> AggregateRows(
    const proto::ExperimentSpec& spec, const std::vector<proto::RankResult>& by_rank) {
  if (absl::Status st = CheckRanks(spec, by_rank); !st.ok()) return st;
  const Collective* collective = FindCollective(by_rank[0].algorithm());
  if (collective == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown algorithm ", by_rank[0].algorithm()));
  }
  absl::StatusOr<RankGroups> groups = GroupsOf(spec, static_cast<int>(spec.workers()));
  if (!groups.ok()) return groups.status();
  std::vector<proto::ResultRow> rows;
  for (std::size_t g = 0; g < groups->members.size(); ++g) {
    Members members;
    for (int rank : groups->members[g]) members.push_back(&by_rank[static_cast<std::size_t>(rank)]);
    absl::StatusOr<proto::ResultRow> row =
        RowOfGroup(spec, collective, members, *groups, static_cast<int>(g));
    if (!row.ok()) return row.status();
    if (!spec.split().empty()) {
      row->set_split(spec.split());
      row->set_group(static_cast<std::uint32_t>(g));
      for (int rank : groups->members[g]) row->add_group_ranks(static_cast<std::uint32_t>(rank));
    }
    rows.push_back(*std::move(row));
  }
  return rows;
}

std::string GroupLabel(const proto::ResultRow& row, std::size_t groups) {
  if (row.split().empty()) return std::string();
  return absl::StrCat(", group ", row.group() + 1, " of ", groups, " (", row.split(), ")");
}

absl::StatusOr<proto::ResultRow> AggregateRow(const proto::ExperimentSpec& spec,
                                              const std::vector<proto::RankResult>& by_rank) {
  absl::StatusOr<std::vector<proto::ResultRow>> rows = AggregateRows(spec, by_rank);
  if (!rows.ok()) return rows.status();
  if (rows->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("split '", spec.split(), "' makes ",
                                                   rows->size(), " rows, not one"));
  }
  return rows->front();
}


}  // namespace testbed
