#include "allreduce/simulator/segment_simulation.h"

#include <algorithm>
#include <deque>
#include <string>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "allreduce/executor.h"  // kScratchSlots
#include "allreduce/simulator/flow_simulator.h"
#include "allreduce/simulator/sim_fabric.h"

namespace testbed {
namespace {

// Timer tags: a receive applied after its host cost, or a late rank's start.
constexpr std::uint64_t kAppliedTimer = std::uint64_t{1} << 62;
constexpr std::uint64_t kStartTimer = std::uint64_t{2} << 62;
constexpr std::uint64_t kLow32 = (std::uint64_t{1} << 32) - 1;
constexpr std::uint64_t kRankBits = 0x3fff'ffff;  // below the timer bits

std::uint64_t OpTag(int rank, std::uint32_t op) {
  return (static_cast<std::uint64_t>(rank) << 32) | op;
}

struct RankRun {
  std::vector<int> waiting;  // per op: prerequisites not yet finished
  std::vector<std::uint8_t> arrived;
  std::vector<std::uint32_t> match;  // per send: the receiver's op it met
  std::vector<std::uint32_t> receives_left;  // per round
  std::vector<std::uint32_t> round_begin;    // per round its first op; ops.size() at the end
  std::size_t rounds_done = 0;
  std::size_t finished = 0;
  double end_s = -1;
  std::vector<double> round_end_s;
};

class SegmentedRun {
 public:
  SegmentedRun(const std::vector<SegmentPlan>& plans, std::int64_t element_size,
               const SimSetup& setup)
      : plans_(plans),
        element_size_(element_size),
        setup_(setup),
        fabric_(sim_, static_cast<int>(plans.size()), setup.placement, setup.rates),
        ranks_(plans.size()) {
    for (std::size_t r = 0; r < plans.size(); ++r) {
      const SegmentPlan& plan = plans[r];
      RankRun& run = ranks_[r];
      run.arrived.assign(plan.ops.size(), 0);
      run.match.assign(plan.ops.size(), 0);
      run.receives_left = plan.receives_per_round;
      const std::size_t rounds = plan.receives_per_round.size();
      run.round_begin.assign(rounds + 1, static_cast<std::uint32_t>(plan.ops.size()));
      run.waiting.resize(plan.ops.size());
      for (std::size_t i = plan.ops.size(); i-- > 0;) {
        run.waiting[i] = plan.ops[i].prerequisites;
        run.round_begin[plan.ops[i].round] = static_cast<std::uint32_t>(i);
      }
      for (std::size_t k = rounds; k-- > 0;) {
        run.round_begin[k] = std::min(run.round_begin[k], run.round_begin[k + 1]);
      }
    }
  }

  absl::Status Run() {
    const int n = static_cast<int>(plans_.size());
    for (int r = 0; r < n; ++r) {
      if (const double delay = StartDelay(r); delay > 0) {
        sim_.Wake(delay, kStartTimer | static_cast<std::uint64_t>(r));
      } else {
        Start(r);
      }
    }
    std::vector<SimEvent> events;
    while (sim_.Next(events)) {
      for (const SimEvent& event : events) Handle(event);
      events.clear();
    }
    for (int r = 0; r < n; ++r) {
      if (ranks_[static_cast<std::size_t>(r)].end_s < 0) {
        return absl::InternalError(absl::StrCat("the segment plans do not match: rank ", r,
                                                " waits forever in round ",
                                                ranks_[static_cast<std::size_t>(r)].rounds_done));
      }
    }
    return absl::OkStatus();
  }

  double StartDelay(int rank) const {
    const auto r = static_cast<std::size_t>(rank);
    return r < setup_.start_delay_s.size() ? setup_.start_delay_s[r] : 0;
  }
  const RankRun& rank(int r) const { return ranks_[static_cast<std::size_t>(r)]; }
  const FlowSimulator& sim() const { return sim_; }

 private:
  const SegmentOp& OpOf(int rank, std::uint32_t id) const {
    return plans_[static_cast<std::size_t>(rank)].ops[id];
  }
  RankRun& RunOf(int rank) { return ranks_[static_cast<std::size_t>(rank)]; }

  // A message's name on both sides: sender, receiver, round, segment (the
  // executor's tag, with the peers UCX matches on).
  static std::uint64_t MessageKey(int from, int to, std::uint32_t round, std::uint32_t segment) {
    return (static_cast<std::uint64_t>(from) << 48) ^ (static_cast<std::uint64_t>(to) << 32) ^
           (static_cast<std::uint64_t>(round) << 16) ^ segment;
  }

  void Start(int r) {
    const SegmentPlan& plan = plans_[static_cast<std::size_t>(r)];
    RankRun& run = RunOf(r);
    for (std::uint32_t id = 0; id < plan.ops.size(); ++id) {
      const SegmentOp& op = plan.ops[id];
      const bool gated_by_slot = op.IsReceive() && !op.in_place;
      if (gated_by_slot ? op.round < kScratchSlots : run.waiting[id] == 0) Post(r, id);
    }
    AdvanceRounds(r);
    CheckDone(r);
  }

  void Post(int r, std::uint32_t id) {
    const SegmentOp& op = OpOf(r, id);
    if (op.kind == StepKind::kSend) {
      auto& receivers = receives_posted_[MessageKey(r, op.peer, op.round, op.segment)];
      if (receivers.empty()) {
        sends_posted_[MessageKey(r, op.peer, op.round, op.segment)].push_back(id);
        return;
      }
      StartMessage(r, id, receivers.front());
      receivers.pop_front();
      return;
    }
    auto& senders = sends_posted_[MessageKey(op.peer, r, op.round, op.segment)];
    if (senders.empty()) {
      receives_posted_[MessageKey(op.peer, r, op.round, op.segment)].push_back(id);
      return;
    }
    StartMessage(op.peer, senders.front(), id);
    senders.pop_front();
  }

  static std::uint64_t PairKey(int from, int to) {
    return (static_cast<std::uint64_t>(from) << 32) | static_cast<std::uint32_t>(to);
  }

  // Both sides are posted: the message goes once the ones before it between
  // the same two ranks have.
  void StartMessage(int from, std::uint32_t send, std::uint32_t receive) {
    RunOf(from).match[send] = receive;
    Connection& connection = connections_[PairKey(from, OpOf(from, send).peer)];
    if (connection.busy) {
      connection.waiting.push_back(send);
      return;
    }
    connection.busy = true;
    Transmit(from, send);
  }

  void Transmit(int from, std::uint32_t send) {
    const SegmentOp& op = OpOf(from, send);
    sim_.StartFlow(fabric_.HostToHost(from, op.peer),
                   static_cast<double>(op.count) * static_cast<double>(element_size_),
                   setup_.alpha_s, OpTag(from, send));
  }

  // The message `send` of `from` arrived: the next on its connection goes.
  void Arrived(int from, std::uint32_t send) {
    Connection& connection = connections_[PairKey(from, OpOf(from, send).peer)];
    if (connection.waiting.empty()) {
      connection.busy = false;
      return;
    }
    Transmit(from, connection.waiting.front());
    connection.waiting.pop_front();
  }

  // A receive whose data is in and whose prerequisites finished: applied
  // after the host cost, if any.
  void Apply(int r, std::uint32_t id, std::vector<std::uint32_t>& now) {
    if (setup_.host_s_per_byte > 0) {
      sim_.Wake(static_cast<double>(OpOf(r, id).count) * static_cast<double>(element_size_) *
                    setup_.host_s_per_byte,
                kAppliedTimer | OpTag(r, id));
    } else {
      now.push_back(id);
    }
  }

  // Finishes `first` and whatever that unblocks, breadth first.
  void Finish(int r, std::uint32_t first) {
    RankRun& run = RunOf(r);
    std::vector<std::uint32_t> queue = {first};
    for (std::size_t q = 0; q < queue.size(); ++q) {
      const SegmentOp& op = OpOf(r, queue[q]);
      if (op.IsReceive()) --run.receives_left[op.round];
      ++run.finished;
      for (const std::uint32_t next : op.dependents) {
        if (--run.waiting[next] > 0) continue;
        const SegmentOp& unblocked = OpOf(r, next);
        if (!unblocked.IsReceive() || unblocked.in_place) {
          Post(r, next);
        } else if (run.arrived[next] != 0) {
          Apply(r, next, queue);
        }
      }
    }
    AdvanceRounds(r);
    CheckDone(r);
  }

  // Rounds whose receives are all applied end, and free their scratch slot
  // for the receives of the round kScratchSlots later.
  void AdvanceRounds(int r) {
    RankRun& run = RunOf(r);
    const std::size_t rounds = run.receives_left.size();
    while (run.rounds_done < rounds && run.receives_left[run.rounds_done] == 0) {
      if (setup_.record_spans) run.round_end_s.push_back(sim_.now());
      const std::size_t opened = ++run.rounds_done + kScratchSlots - 1;
      if (opened >= rounds) continue;
      for (std::uint32_t id = run.round_begin[opened]; id < run.round_begin[opened + 1]; ++id) {
        const SegmentOp& op = OpOf(r, id);
        if (op.IsReceive() && !op.in_place) Post(r, id);
      }
    }
  }

  void CheckDone(int r) {
    RankRun& run = RunOf(r);
    if (run.end_s < 0 && run.finished == plans_[static_cast<std::size_t>(r)].ops.size()) {
      run.end_s = sim_.now();
    }
  }

  void Handle(const SimEvent& event) {
    const int r = static_cast<int>((event.tag >> 32) & kRankBits);
    const auto id = static_cast<std::uint32_t>(event.tag & kLow32);
    if (event.kind == SimEvent::Kind::kTimer) {
      if ((event.tag & kStartTimer) != 0) {
        Start(static_cast<int>(event.tag & kLow32));
      } else {
        Finish(r, id);
      }
      return;
    }
    // A message arrived: its send is done, and its receive has its data.
    Arrived(r, id);
    const SegmentOp& send = OpOf(r, id);
    const int to = send.peer;
    const std::uint32_t receive = RunOf(r).match[id];
    Finish(r, id);
    RankRun& receiver = RunOf(to);
    receiver.arrived[receive] = 1;
    if (OpOf(to, receive).in_place || receiver.waiting[receive] == 0) {
      std::vector<std::uint32_t> now;
      Apply(to, receive, now);
      if (!now.empty()) Finish(to, receive);
    }
  }

  const std::vector<SegmentPlan>& plans_;
  std::int64_t element_size_;
  const SimSetup& setup_;
  FlowSimulator sim_;
  SimFabric fabric_;
  std::vector<RankRun> ranks_;
  struct Connection {
    bool busy = false;
    std::deque<std::uint32_t> waiting;  // sends matched, behind the one in flight
  };
  std::unordered_map<std::uint64_t, Connection> connections_;  // by (from, to)
  std::unordered_map<std::uint64_t, std::deque<std::uint32_t>> sends_posted_;
  std::unordered_map<std::uint64_t, std::deque<std::uint32_t>> receives_posted_;
};

// A rank's rounds as spans, back to back from its start: one per round with
// operations, ending when its receives were applied; the last ends with the
// rank, whose last sends may finish after its last receive.
std::vector<SimSpan> SpansOf(const SegmentPlan& plan, const RankRun& run, double start_s,
                             std::int64_t element_size) {
  std::vector<SimSpan> spans;
  double at = start_s;
  const std::size_t rounds = plan.receives_per_round.size();
  for (std::size_t k = 0; k < rounds && k < run.round_end_s.size(); ++k) {
    const double end = k + 1 == rounds ? std::max(run.round_end_s[k], run.end_s)
                                       : run.round_end_s[k];
    if (run.round_begin[k] < run.round_begin[k + 1]) {
      SimSpan& span = spans.emplace_back();
      span.start_s = at;
      span.end_s = end;
      span.round = static_cast<std::int32_t>(k);
      for (std::uint32_t id = run.round_begin[k]; id < run.round_begin[k + 1]; ++id) {
        const SegmentOp& op = plan.ops[id];
        const std::int64_t bytes = op.count * element_size;
        if (op.IsReceive()) {
          span.bytes_received += bytes;
          continue;
        }
        if (span.peer < 0) span.peer = op.peer;
        if (op.segment == 0) ++span.sends;
        span.bytes_sent += bytes;
      }
    }
    at = end;
  }
  return spans;
}

}  // namespace

absl::Status PlaySegmentPlans(const std::vector<SegmentPlan>& plans, std::int64_t element_size,
                              const SimSetup& setup, SimResult& result) {
  SegmentedRun run(plans, element_size, setup);
  if (absl::Status st = run.Run(); !st.ok()) return st;
  for (std::size_t r = 0; r < plans.size(); ++r) {
    const int rank = static_cast<int>(r);
    result.ranks[r].time_s = run.rank(rank).end_s - run.StartDelay(rank);
    if (setup.record_spans) {
      result.ranks[r].spans = SpansOf(plans[r], run.rank(rank), run.StartDelay(rank), element_size);
    }
  }
  result.flows = run.sim().flows_started();
  result.rate_solves = run.sim().rate_solves();
  return absl::OkStatus();
}

}  // namespace testbed
