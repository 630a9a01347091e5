#include "experiments/workload/step_simulation.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "experiments/workload/workload_trace.h"

namespace testbed {
namespace {

using Interval = std::pair<double, double>;

// The spans as disjoint intervals, in order.
std::vector<Interval> Merged(std::vector<Interval> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<Interval> merged;
  for (const Interval& span : spans) {
    if (!merged.empty() && span.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, span.second);
    } else {
      merged.push_back(span);
    }
  }
  return merged;
}

double Length(const std::vector<Interval>& merged) {
  double length = 0;
  for (const auto& [begin, end] : merged) length += end - begin;
  return length;
}

// Length of the intersection of two sets of disjoint, ordered intervals.
double OverlapLength(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  double overlap = 0;
  for (std::size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    overlap += std::max(0.0, std::min(a[i].second, b[j].second) - std::max(a[i].first, b[j].first));
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return overlap;
}

class StepReplay {
 public:
  StepReplay(const proto::WorkloadTrace& trace, const CollectiveTime& time, double flops_per_s)
      : trace_(trace), time_(time), flops_per_s_(flops_per_s),
        world_(static_cast<int>(trace.world_size())) {}

  absl::StatusOr<StepSimulation> Run() {
    StepSimulation out;
    out.ops.resize(static_cast<std::size_t>(trace_.ops_size()));
    std::vector<double> compute_free(static_cast<std::size_t>(world_), 0);
    std::vector<double> stream_free(static_cast<std::size_t>(trace_.communicators_size()), 0);
    compute_.resize(static_cast<std::size_t>(world_));
    communication_.resize(static_cast<std::size_t>(world_));
    for (int i = 0; i < trace_.ops_size(); ++i) {
      const proto::WorkloadOp& op = trace_.ops(i);
      double ready = 0;
      for (std::uint32_t dep : op.deps()) ready = std::max(ready, out.ops[dep].end_s);
      const proto::Communicator& c = trace_.communicators(static_cast<int>(op.communicator()));
      const bool compute = op.kind() == proto::WorkloadOp::compute;
      double& stream = stream_free[op.communicator()];
      double start = compute ? ready : std::max(ready, stream);
      if (compute) {
        for (const proto::RankGroup& g : c.groups()) {
          for (std::uint32_t r : g.ranks()) start = std::max(start, compute_free[r]);
        }
      }
      absl::StatusOr<double> duration = compute ? op.flops() / flops_per_s_ : Communication(op, c);
      if (!duration.ok()) return duration.status();
      const double end = start + *duration;
      out.ops[i] = {start, end};
      out.step_s = std::max(out.step_s, end);
      if (!compute) stream = end;
      for (const proto::RankGroup& g : c.groups()) {
        for (std::uint32_t r : g.ranks()) {
          if (compute) compute_free[r] = end;
          (compute ? compute_ : communication_)[r].emplace_back(start, end);
        }
      }
    }
    out.collectives_simulated = durations_.size();
    Account(out);
    return out;
  }

 private:
  // The op's collective on every group of its communicator at once, timed
  // once per (communicator, kind, bytes).
  absl::StatusOr<double> Communication(const proto::WorkloadOp& op, const proto::Communicator& c) {
    const auto key = std::make_tuple(op.communicator(), static_cast<int>(op.kind()), op.bytes());
    if (const auto found = durations_.find(key); found != durations_.end()) return found->second;
    absl::StatusOr<double> seconds = time_(op, c);
    if (seconds.ok()) durations_[key] = *seconds;
    return seconds;
  }

  void Account(StepSimulation& out) {
    out.ranks.resize(static_cast<std::size_t>(world_));
    double busiest = -1;
    for (int r = 0; r < world_; ++r) {
      RankStep& rank = out.ranks[r];
      const std::vector<Interval> compute = Merged(std::move(compute_[r]));
      const std::vector<Interval> communication = Merged(std::move(communication_[r]));
      rank.compute_s = Length(compute);
      rank.communication_s = Length(communication);
      rank.overlap_s = OverlapLength(compute, communication);
      if (rank.compute_s + rank.exposed_s() > busiest) {
        busiest = rank.compute_s + rank.exposed_s();
        out.critical_rank = r;
      }
    }
  }

  const proto::WorkloadTrace& trace_;
  const CollectiveTime& time_;
  double flops_per_s_;
  int world_;
  std::vector<std::vector<Interval>> compute_, communication_;
  std::map<std::tuple<std::uint32_t, int, std::uint64_t>, double> durations_;
};

// The simulator's time for an operation: all of its communicator's groups on
// the fabric at once; a send-receive is a broadcast inside its pair.
absl::StatusOr<double> SimulatedCollective(const proto::WorkloadTrace& trace,
                                           const TraceAlgorithms& algorithms, const SimSetup& world,
                                           const proto::WorkloadOp& op,
                                           const proto::Communicator& c) {
  const int n = static_cast<int>(trace.world_size());
  const bool pair = op.kind() == proto::WorkloadOp::send_recv;
  const Collective* collective = AlgorithmOf(algorithms, op.kind());
  SimSetup setup = world;
  absl::StatusOr<RankGroups> groups = CommunicatorGroups(c, n);
  if (!groups.ok()) return groups.status();
  setup.groups = *std::move(groups);
  setup.record_spans = false;
  setup.start_delay_s.clear();  // a slow rank is a slower device here, not a late start
  // A pair's sender is its first rank: the broadcast's root, as an index in the sorted pair.
  const int root = pair && c.groups(0).ranks(0) > c.groups(0).ranks(1) ? 1 : 0;
  absl::StatusOr<SimResult> sim = SimulateSchedule(
      *collective, n, static_cast<std::int64_t>(op.bytes()), TraceElementBytes(trace), setup, root);
  if (!sim.ok()) return sim.status();
  double longest = 0;
  for (const proto::RankGroup& g : c.groups()) {
    for (std::uint32_t r : g.ranks()) longest = std::max(longest, sim->ranks[r].time_s);
  }
  return longest;
}

}  // namespace

absl::StatusOr<StepSimulation> ReplayStep(const proto::WorkloadTrace& trace,
                                          const CollectiveTime& time, double device_flops_per_s) {
  if (!(device_flops_per_s > 0)) {
    return absl::InvalidArgumentError("the device's rate must be above 0 FLOP/s");
  }
  return StepReplay(trace, time, device_flops_per_s).Run();
}

absl::StatusOr<StepSimulation> SimulateStep(const proto::WorkloadTrace& trace,
                                            const TraceAlgorithms& algorithms,
                                            const SimSetup& setup, double device_flops_per_s) {
  if (static_cast<int>(setup.rates.host_bps.size()) != static_cast<int>(trace.world_size())) {
    return absl::InvalidArgumentError(absl::StrCat("a fabric of ", setup.rates.host_bps.size(),
                                                   " hosts for ", trace.world_size(), " ranks"));
  }
  const CollectiveTime simulated = [&](const proto::WorkloadOp& op, const proto::Communicator& c) {
    return SimulatedCollective(trace, algorithms, setup, op, c);
  };
  return ReplayStep(trace, simulated, device_flops_per_s);
}

}  // namespace testbed
