#include "allreduce/cost_model.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "allreduce/chunking.h"
#include "common/limits.h"
#include "common/signal_waiter.h"

namespace testbed {

double ModelTime(const LinkModel& link, int rounds, std::int64_t bottleneck_bytes) {
  return link.alpha_s * rounds + link.beta_s_per_byte * static_cast<double>(bottleneck_bytes);
}

std::vector<std::int64_t> RoundBottleneckBytes(const Collective& collective, int world_size,
                                               std::int64_t bytes, std::int64_t element_size,
                                               int root) {
  const std::int64_t count = bytes / element_size;
  std::vector<std::int64_t> busiest;  // in elements, per round
  for (int rank = 0; rank < world_size; ++rank) {
    const Schedule s = collective.Build(rank, world_size, count, root);
    if (busiest.size() < s.rounds.size()) busiest.resize(s.rounds.size(), 0);
    for (std::size_t k = 0; k < s.rounds.size(); ++k) {
      std::int64_t sent = 0;
      std::int64_t received = 0;
      for (const Step& step : s.rounds[k].steps) {
        (step.IsReceive() ? received : sent) += step.count;
      }
      busiest[k] = std::max({busiest[k], sent, received});
    }
  }
  for (std::int64_t& b : busiest) b *= element_size;
  return busiest;
}

namespace {

CostEstimate FromRounds(std::vector<std::int64_t> round_bytes, const LinkModel& link) {
  CostEstimate e;
  e.rounds = static_cast<int>(round_bytes.size());
  for (std::int64_t b : round_bytes) e.bottleneck_bytes += b;
  e.round_bottleneck_bytes = std::move(round_bytes);
  e.time_s = ModelTime(link, e.rounds, e.bottleneck_bytes);
  return e;
}

}  // namespace

CostEstimate EstimateCollective(const Collective& collective, int world_size,
                                std::int64_t bytes, std::int64_t element_size,
                                const LinkModel& link, int root) {
  return FromRounds(RoundBottleneckBytes(collective, world_size, bytes, element_size, root),
                    link);
}

namespace {

// Seconds for `bytes` over a link of `bps` (0: unlimited, no time).
double LinkSeconds(std::int64_t bytes, double bps) {
  return bps > 0 ? 8.0 * static_cast<double>(bytes) / bps : 0;
}

// One round's load on every link, in bytes.
struct RoundLoad {
  std::vector<std::int64_t> host_out, host_in;      // per rank
  std::vector<std::int64_t> uplink_up, uplink_down;  // per rack
};

}  // namespace

CostEstimate EstimateOnFabric(const Collective& collective, int world_size, std::int64_t bytes,
                              std::int64_t element_size, double alpha_s,
                              const Placement& placement, const LinkRates& rates) {
  const std::int64_t count = bytes / element_size;
  const auto racks = static_cast<std::size_t>(placement.Racks(world_size));
  const auto ranks = static_cast<std::size_t>(world_size);
  std::vector<RoundLoad> loads;
  for (int rank = 0; rank < world_size; ++rank) {
    const Schedule s = collective.Build(rank, world_size, count, 0, placement);
    if (loads.size() < s.rounds.size()) {
      loads.resize(s.rounds.size(), RoundLoad{std::vector<std::int64_t>(ranks),
                                              std::vector<std::int64_t>(ranks),
                                              std::vector<std::int64_t>(racks),
                                              std::vector<std::int64_t>(racks)});
    }
    const auto rack = static_cast<std::size_t>(placement.RackOf(rank));
    for (std::size_t k = 0; k < s.rounds.size(); ++k) {
      RoundLoad& load = loads[k];
      for (const Step& step : s.rounds[k].steps) {
        const std::int64_t b = step.count * element_size;
        if (step.IsReceive()) {
          load.host_in[static_cast<std::size_t>(rank)] += b;
          continue;
        }
        load.host_out[static_cast<std::size_t>(rank)] += b;
        const auto peer_rack = static_cast<std::size_t>(placement.RackOf(step.peer));
        if (peer_rack == rack) continue;
        load.uplink_up[rack] += b;
        load.uplink_down[peer_rack] += b;
      }
    }
  }
  CostEstimate e;
  e.rounds = static_cast<int>(loads.size());
  for (const RoundLoad& load : loads) {
    double slowest = 0;
    std::int64_t slowest_bytes = 0;
    const auto consider = [&](std::int64_t b, double bps) {
      const double t = LinkSeconds(b, bps);
      if (t > slowest || (t == slowest && b > slowest_bytes)) {
        slowest = t;
        slowest_bytes = b;
      }
    };
    for (std::size_t r = 0; r < ranks; ++r) {
      const double bps = r < rates.host_bps.size() ? rates.host_bps[r] : 0;
      consider(load.host_out[r], bps);
      consider(load.host_in[r], bps);
    }
    for (std::size_t r = 0; r < racks && r < rates.uplink_bps.size(); ++r) {
      consider(load.uplink_up[r], rates.uplink_bps[r]);
      consider(load.uplink_down[r], rates.uplink_bps[r]);
    }
    e.round_bottleneck_bytes.push_back(slowest_bytes);
    e.bottleneck_bytes += slowest_bytes;
    e.time_s += alpha_s + slowest;
  }
  return e;
}

std::int64_t LargestShardBytes(std::int64_t bytes, int servers, std::int64_t element_size) {
  return ChunkOf(bytes / element_size, std::max(servers, 1), 0).count * element_size;
}

CostEstimate EstimateParameterServer(int workers, int servers, std::int64_t bytes,
                                     std::int64_t element_size, const LinkModel& link) {
  const std::int64_t slice = LargestShardBytes(bytes, servers, element_size);
  // The shard works in whole elements: its chunk is the largest multiple of
  // the element that fits kParameterServerChunkBytes.
  const std::int64_t chunk = std::min(
      slice, std::max<std::int64_t>(element_size, kParameterServerChunkBytes / element_size *
                                                      element_size));
  return FromRounds({workers * chunk, workers * slice}, link);
}

CostEstimate EstimateParameterServerOnFabric(int workers, int servers, std::int64_t bytes,
                                             std::int64_t element_size, double alpha_s,
                                             const Placement& placement, const LinkRates& rates,
                                             const ServerSites& sites) {
  // Nodes: worker w on node w; shard s on node s (colocated) or on node
  // workers + s, on the spine (rack -1), behind a link of sites.server_bps.
  const int nodes = sites.colocated ? workers : workers + servers;
  const auto node_of_shard = [&](int s) { return sites.colocated ? s : workers + s; };
  const auto rack_of = [&](int node) { return node < workers ? placement.RackOf(node) : -1; };
  const auto rate_of = [&](int node) {
    if (node >= workers) return sites.server_bps;
    return static_cast<std::size_t>(node) < rates.host_bps.size() ? rates.host_bps[node] : 0.0;
  };
  const std::int64_t count = bytes / element_size;
  const std::int64_t chunk_elements =
      std::max<std::int64_t>(1, kParameterServerChunkBytes / element_size);
  CostEstimate e;
  e.rounds = 2;
  // Round 1: the first chunk of every push; round 2: the rest of the pushes,
  // and all the values.
  for (int round = 0; round < 2; ++round) {
    std::vector<std::int64_t> out(static_cast<std::size_t>(nodes)), in(out.size());
    std::vector<std::int64_t> up(rates.uplink_bps.size()), down(up.size());
    const auto flow = [&](int from, int to, std::int64_t b) {
      if (from == to || b == 0) return;  // a colocated shard's own worker: no wire
      out[static_cast<std::size_t>(from)] += b;
      in[static_cast<std::size_t>(to)] += b;
      const int a = rack_of(from), z = rack_of(to);
      if (a == z || up.empty()) return;
      if (a >= 0) up[static_cast<std::size_t>(a)] += b;
      if (z >= 0) down[static_cast<std::size_t>(z)] += b;
    };
    for (int s = 0; s < servers; ++s) {
      const std::int64_t slice = ChunkOf(count, servers, s).count * element_size;
      const std::int64_t first = std::min(slice, chunk_elements * element_size);
      for (int w = 0; w < workers; ++w) {
        flow(w, node_of_shard(s), round == 0 ? first : slice - first);
        if (round == 1) flow(node_of_shard(s), w, slice);
      }
    }
    double slowest = 0;
    std::int64_t slowest_bytes = 0;
    const auto consider = [&](std::int64_t b, double bps) {
      if (LinkSeconds(b, bps) > slowest || (slowest == 0 && b > slowest_bytes)) {
        slowest = LinkSeconds(b, bps);
        slowest_bytes = b;
      }
    };
    for (int node = 0; node < nodes; ++node) {
      consider(out[static_cast<std::size_t>(node)], rate_of(node));
      consider(in[static_cast<std::size_t>(node)], rate_of(node));
    }
    for (std::size_t r = 0; r < up.size(); ++r) {
      consider(up[r], rates.uplink_bps[r]);
      consider(down[r], rates.uplink_bps[r]);
    }
    e.round_bottleneck_bytes.push_back(slowest_bytes);
    e.bottleneck_bytes += slowest_bytes;
    e.time_s += alpha_s + slowest;
  }
  return e;
}

absl::StatusOr<CostEstimate> EstimateAlgorithm(std::string_view algorithm, int workers,
                                              int servers, std::int64_t bytes,
                                              std::int64_t element_size, const LinkModel& link) {
  const Collective* collective = FindCollective(algorithm);
  if (collective == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown algorithm '", std::string(algorithm),
                                                   "' (choose from ",
                                                   CollectiveNames(Kinds::kAll), ")"));
  }
  // The work is bounded before it is done: schedules for N ranks cost up to
  // N^2 steps (a ring), so N past the limit is refused, not built.
  if (workers < 1 || workers > kMaxSimulatedWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("workers ", workers, " is outside 1..", kMaxSimulatedWorkers, " (common/limits.h)"));
  }
  if (InterruptRequested()) return absl::CancelledError("interrupted");
  switch (collective->runner) {
    case Runner::kParameterServer:
      if (servers < 1 || servers > kMaxServers) {
        return absl::InvalidArgumentError(absl::StrCat("servers ", servers, " is outside 1..",
                                                       kMaxServers, " (common/limits.h)"));
      }
      return EstimateParameterServer(workers, servers, bytes, element_size, link);
    case Runner::kSchedule:
      return EstimateCollective(*collective, workers, bytes, element_size, link);
  }
  return absl::InternalError("unknown runner");
}

absl::StatusOr<AlphaBetaFit> FitAlphaBeta(const std::vector<FitPoint>& points) {
  if (points.size() < 2) {
    return absl::InvalidArgumentError("needs at least 2 measurements to fit alpha and beta");
  }
  // Absolute least squares: the large sizes, where the link's rate decides
  // the time, carry the most weight - as they should for beta. (Relative
  // residuals would let the smallest sizes decide, and on an emulated link
  // those ride the token bucket's burst, faster than any rate.) Columns are
  // scaled to unit size so that rounds (~10) and bytes (~1e7) condition alike.
  double scale_r = 0;
  double scale_b = 0;
  for (const FitPoint& p : points) {
    scale_r = std::max(scale_r, static_cast<double>(p.rounds));
    scale_b = std::max(scale_b, static_cast<double>(p.bottleneck_bytes));
  }
  if (scale_r == 0 || scale_b == 0) {
    return absl::InvalidArgumentError("all measurements have zero rounds or zero bytes");
  }
  double srr = 0, srb = 0, sbb = 0, sr = 0, sb = 0;  // sr, sb: the columns times the times
  for (const FitPoint& p : points) {
    const double r = p.rounds / scale_r;
    const double b = static_cast<double>(p.bottleneck_bytes) / scale_b;
    srr += r * r;
    srb += r * b;
    sbb += b * b;
    sr += r * p.time_s;
    sb += b * p.time_s;
  }
  const double det = srr * sbb - srb * srb;
  if (!(std::abs(det) > 1e-12 * srr * sbb)) {
    return absl::InvalidArgumentError(
        "rounds and bottleneck bytes are proportional over these measurements (needs at "
        "least 2 distinct sizes)");
  }
  double alpha = (sr * sbb - sb * srb) / det;
  double beta = (srr * sb - srb * sr) / det;
  // Neither a latency nor a time per byte is negative: where the free optimum
  // has one, the best fit lies on that boundary, with the other term alone.
  if (alpha < 0) {
    alpha = 0;
    beta = sb / sbb;
  } else if (beta < 0) {
    beta = 0;
    alpha = sr / srr;
  }
  AlphaBetaFit fit;
  fit.points = static_cast<int>(points.size());
  fit.link.alpha_s = alpha / scale_r;
  fit.link.beta_s_per_byte = beta / scale_b;

  double mean = 0;
  for (const FitPoint& p : points) mean += p.time_s;
  mean /= static_cast<double>(points.size());
  double ss_res = 0, ss_tot = 0;
  for (const FitPoint& p : points) {
    const double residual = p.time_s - ModelTime(fit.link, p.rounds, p.bottleneck_bytes);
    ss_res += residual * residual;
    ss_tot += (p.time_s - mean) * (p.time_s - mean);
    if (p.time_s != 0) {
      fit.worst_relative_residual =
          std::max(fit.worst_relative_residual, std::abs(residual / p.time_s));
    }
  }
  fit.r_squared = ss_tot > 0 ? 1 - ss_res / ss_tot : (ss_res == 0 ? 1.0 : 0.0);
  return fit;
}

}  // namespace testbed
