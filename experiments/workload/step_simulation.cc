#include "experiments/workload/step_simulation.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "allreduce/simulator/concurrent_collectives.h"
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

// How a replay starts an operation's communication on the clock; the
// operation's index comes back from the clock's Next when it ended.
using StartCommunication = std::function<absl::Status(int op, ConcurrentCollectives& clock)>;

// Operation i's predecessors: its dependencies, the operation before it on its
// communicator's stream (a communication), the compute before it on each of
// its ranks (a compute).
std::vector<std::vector<int>> Predecessors(const proto::WorkloadTrace& trace) {
  std::vector<std::vector<int>> preds(static_cast<std::size_t>(trace.ops_size()));
  std::vector<int> last_on_stream(static_cast<std::size_t>(trace.communicators_size()), -1);
  std::vector<int> last_compute(trace.world_size(), -1);
  for (int i = 0; i < trace.ops_size(); ++i) {
    const proto::WorkloadOp& op = trace.ops(i);
    std::vector<int>& p = preds[static_cast<std::size_t>(i)];
    p.assign(op.deps().begin(), op.deps().end());
    if (op.kind() != proto::WorkloadOp::compute) {
      int& last = last_on_stream[op.communicator()];
      if (last >= 0) p.push_back(last);
      last = i;
    } else {
      for (const proto::RankGroup& g : trace.communicators(static_cast<int>(op.communicator())).groups()) {
        for (std::uint32_t r : g.ranks()) {
          if (last_compute[r] >= 0) p.push_back(last_compute[r]);
          last_compute[r] = i;
        }
      }
    }
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
  }
  return preds;
}

// The step as events: an operation starts the instant its last predecessor
// ends, a compute lasts its FLOPs over the rate, a communication what
// `start` makes it last on `clock`.
class StepReplay {
 public:
  StepReplay(const proto::WorkloadTrace& trace, double flops_per_s, ConcurrentCollectives& clock,
             StartCommunication start)
      : trace_(trace), flops_per_s_(flops_per_s), world_(static_cast<int>(trace.world_size())),
        clock_(clock), start_(std::move(start)) {}

  absl::StatusOr<StepSimulation> Run() {
    if (!(flops_per_s_ > 0)) {
      return absl::InvalidArgumentError("the device's rate must be above 0 FLOP/s");
    }
    StepSimulation out;
    const int n_ops = trace_.ops_size();
    out.ops.resize(static_cast<std::size_t>(n_ops));
    const std::vector<std::vector<int>> preds = Predecessors(trace_);
    std::vector<std::vector<int>> successors(static_cast<std::size_t>(n_ops));
    std::vector<std::size_t> waiting(static_cast<std::size_t>(n_ops));
    for (int i = 0; i < n_ops; ++i) {
      waiting[i] = preds[i].size();
      for (int p : preds[i]) successors[static_cast<std::size_t>(p)].push_back(i);
    }
    for (int i = 0; i < n_ops; ++i) {
      if (waiting[i] == 0) {
        if (absl::Status st = Launch(i, out); !st.ok()) return st;
      }
    }
    int ended_ops = 0;
    std::vector<std::uint64_t> ended;
    for (;;) {
      ended.clear();
      absl::StatusOr<bool> more = clock_.Next(ended);
      if (!more.ok()) return more.status();
      if (!*more) break;
      for (std::uint64_t tag : ended) {
        const int i = static_cast<int>(tag);
        out.ops[i].end_s = clock_.now();
        out.step_s = std::max(out.step_s, clock_.now());
        ++ended_ops;
        for (int s : successors[static_cast<std::size_t>(i)]) {
          if (--waiting[static_cast<std::size_t>(s)] > 0) continue;
          if (absl::Status st = Launch(s, out); !st.ok()) return st;
        }
      }
    }
    if (ended_ops != n_ops) {
      return absl::InternalError(absl::StrCat(n_ops - ended_ops, " operations never started"));
    }
    Account(out);
    return out;
  }

 private:
  absl::Status Launch(int i, StepSimulation& out) {
    out.ops[i].start_s = clock_.now();
    const proto::WorkloadOp& op = trace_.ops(i);
    if (op.kind() != proto::WorkloadOp::compute) return start_(i, clock_);
    clock_.Wake(op.flops() / flops_per_s_, static_cast<std::uint64_t>(i));
    return absl::OkStatus();
  }

  // Each rank's compute and communication spans, merged, and the critical rank.
  void Account(StepSimulation& out) {
    std::vector<std::vector<Interval>> compute(static_cast<std::size_t>(world_));
    std::vector<std::vector<Interval>> communication(static_cast<std::size_t>(world_));
    for (int i = 0; i < trace_.ops_size(); ++i) {
      const proto::WorkloadOp& op = trace_.ops(i);
      auto& spans = op.kind() == proto::WorkloadOp::compute ? compute : communication;
      for (const proto::RankGroup& g : trace_.communicators(static_cast<int>(op.communicator())).groups()) {
        for (std::uint32_t r : g.ranks()) spans[r].emplace_back(out.ops[i].start_s, out.ops[i].end_s);
      }
    }
    out.ranks.resize(static_cast<std::size_t>(world_));
    double busiest = -1;
    for (int r = 0; r < world_; ++r) {
      RankStep& rank = out.ranks[r];
      const std::vector<Interval> busy = Merged(std::move(compute[r]));
      const std::vector<Interval> talking = Merged(std::move(communication[r]));
      rank.compute_s = Length(busy);
      rank.communication_s = Length(talking);
      rank.overlap_s = OverlapLength(busy, talking);
      if (rank.compute_s + rank.exposed_s() > busiest) {
        busiest = rank.compute_s + rank.exposed_s();
        out.critical_rank = r;
      }
    }
  }

  const proto::WorkloadTrace& trace_;
  double flops_per_s_;
  int world_;
  ConcurrentCollectives& clock_;
  StartCommunication start_;
};

// A clock with no links: for a replay whose communications have known times.
ConcurrentCollectives TimersOnly(int world_size) {
  SimSetup setup;
  setup.rates.host_bps.assign(static_cast<std::size_t>(world_size), 0);
  return ConcurrentCollectives(world_size, setup);
}

// Where a send-receive's pair sends from: its first rank, as an index in the sorted pair.
int PairRoot(const proto::Communicator& c) {
  return c.groups(0).ranks(0) > c.groups(0).ranks(1) ? 1 : 0;
}

}  // namespace

absl::StatusOr<StepSimulation> ReplayStep(const proto::WorkloadTrace& trace,
                                          const CollectiveTime& time, double device_flops_per_s) {
  // Each distinct (communicator, kind, bytes) is timed once.
  std::map<std::tuple<std::uint32_t, int, std::uint64_t>, double> durations;
  const StartCommunication start = [&](int i, ConcurrentCollectives& clock) -> absl::Status {
    const proto::WorkloadOp& op = trace.ops(i);
    const auto key = std::make_tuple(op.communicator(), static_cast<int>(op.kind()), op.bytes());
    auto found = durations.find(key);
    if (found == durations.end()) {
      absl::StatusOr<double> seconds =
          time(op, trace.communicators(static_cast<int>(op.communicator())));
      if (!seconds.ok()) return seconds.status();
      found = durations.emplace(key, *seconds).first;
    }
    clock.Wake(found->second, static_cast<std::uint64_t>(i));
    return absl::OkStatus();
  };
  ConcurrentCollectives clock = TimersOnly(static_cast<int>(trace.world_size()));
  return StepReplay(trace, device_flops_per_s, clock, start).Run();
}

absl::StatusOr<StepSimulation> SimulateStep(const proto::WorkloadTrace& trace,
                                            const TraceAlgorithms& algorithms,
                                            const SimSetup& setup, double device_flops_per_s) {
  const int n = static_cast<int>(trace.world_size());
  if (static_cast<int>(setup.rates.host_bps.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("a fabric of ", setup.rates.host_bps.size(),
                                                   " hosts for ", trace.world_size(), " ranks"));
  }
  if (absl::Status st = ValidateRackPlacement(setup.placement, n); !st.ok()) return st;
  // Every communicator's groups, built once; the clock keeps their schedules.
  std::vector<RankGroups> groups;
  groups.reserve(static_cast<std::size_t>(trace.communicators_size()));
  for (const proto::Communicator& c : trace.communicators()) {
    absl::StatusOr<RankGroups> g = CommunicatorGroups(c, n);
    if (!g.ok()) return g.status();
    groups.push_back(*std::move(g));
  }
  const std::int64_t element = TraceElementBytes(trace);
  // A slow rank is a slower device here, not a late start: ConcurrentCollectives
  // takes the fabric only.
  ConcurrentCollectives clock(n, setup);
  const StartCommunication start = [&](int i, ConcurrentCollectives& on) {
    const proto::WorkloadOp& op = trace.ops(i);
    const proto::Communicator& c = trace.communicators(static_cast<int>(op.communicator()));
    const int root = op.kind() == proto::WorkloadOp::send_recv ? PairRoot(c) : 0;
    return on.Start(*AlgorithmOf(algorithms, op.kind()), static_cast<std::int64_t>(op.bytes()),
                    element, groups[op.communicator()], root, static_cast<std::uint64_t>(i));
  };
  return StepReplay(trace, device_flops_per_s, clock, start).Run();
}

}  // namespace testbed
