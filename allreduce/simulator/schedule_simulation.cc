// SimulateSchedule (allreduce/simulator/simulation.h): every rank's schedule,
// kept compact - per round its sends (peer, elements) and how many messages
// it receives - played round by round on the fabric's flows.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/segment_plan.h"
#include "allreduce/simulator/flow_simulator.h"
#include "allreduce/simulator/segment_simulation.h"
#include "allreduce/simulator/sim_fabric.h"
#include "allreduce/simulator/simulation.h"

namespace testbed {
namespace {

struct CompactSend {
  std::int32_t peer;
  std::uint32_t count;  // elements
};

// One rank's schedule as the simulator needs it: a few bytes per step.
struct CompactSchedule {
  std::vector<std::uint32_t> round_begin;  // per round, its first send; one past the last at the end
  std::vector<CompactSend> sends;
  std::vector<std::uint32_t> receives;  // per round, messages that arrive
  std::int64_t elements_received = 0;

  int rounds() const { return static_cast<int>(receives.size()); }
  std::uint64_t MemoryBytes() const {
    return round_begin.capacity() * sizeof(std::uint32_t) + sends.capacity() * sizeof(CompactSend) +
           receives.capacity() * sizeof(std::uint32_t);
  }
};

CompactSchedule Compact(const Schedule& schedule) {
  CompactSchedule compact;
  compact.round_begin.reserve(schedule.rounds.size() + 1);
  compact.receives.reserve(schedule.rounds.size());
  for (const Round& round : schedule.rounds) {
    compact.round_begin.push_back(static_cast<std::uint32_t>(compact.sends.size()));
    std::uint32_t receives = 0;
    for (const Step& step : round.steps) {
      if (step.IsReceive()) {
        ++receives;
        compact.elements_received += step.count;
      } else {
        compact.sends.push_back({step.peer, static_cast<std::uint32_t>(step.count)});
      }
    }
    compact.receives.push_back(receives);
  }
  compact.round_begin.push_back(static_cast<std::uint32_t>(compact.sends.size()));
  compact.sends.shrink_to_fit();
  return compact;
}

// A send posted before its receiver reached the round: it waits at the receiver.
struct Parked {
  std::int32_t round;
  std::int32_t from;
  std::uint32_t send;  // index into the sender's sends
};

struct RankState {
  std::int32_t round = -1;  // the round in progress; -1 before the rank began
  bool done = false;
  std::uint32_t sends_left = 0;
  std::uint32_t receives_left = 0;
  double end_s = 0;
  std::vector<Parked> parked;
  std::vector<SimSpan> spans;  // with SimSetup::record_spans
};

// Timer tags: a receive applied after its host cost, or a late rank's start.
constexpr std::uint64_t kAppliedTimer = std::uint64_t{1} << 62;
constexpr std::uint64_t kStartTimer = std::uint64_t{2} << 62;
constexpr std::uint64_t kRankMask = (std::uint64_t{1} << 32) - 1;

class ScheduleRun {
 public:
  ScheduleRun(std::vector<CompactSchedule> plans, std::int64_t element_size,
              const SimSetup& setup)
      : plans_(std::move(plans)),
        element_size_(element_size),
        setup_(setup),
        fabric_(sim_, static_cast<int>(plans_.size()), setup.placement, setup.rates),
        ranks_(plans_.size()) {}

  absl::StatusOr<std::vector<double>> Run() {
    const int n = static_cast<int>(plans_.size());
    for (int r = 0; r < n; ++r) {
      if (const double delay = StartDelay(r); delay > 0) {
        sim_.Wake(delay, kStartTimer | static_cast<std::uint64_t>(r));
      } else {
        Enter(r, 0);
      }
    }
    std::vector<SimEvent> events;
    while (sim_.Next(events)) {
      for (const SimEvent& event : events) Handle(event);
      events.clear();
    }
    std::vector<double> times;
    for (int r = 0; r < n; ++r) {
      const RankState& state = ranks_[static_cast<std::size_t>(r)];
      if (!state.done) {
        return absl::InternalError(absl::StrCat("the schedules do not match: rank ", r,
                                                " waits forever in round ", state.round));
      }
      times.push_back(state.end_s - StartDelay(r));
    }
    return times;
  }

  const FlowSimulator& sim() const { return sim_; }
  std::vector<SimSpan> TakeSpans(int rank) {
    return std::move(ranks_[static_cast<std::size_t>(rank)].spans);
  }

 private:
  double StartDelay(int rank) const {
    const auto r = static_cast<std::size_t>(rank);
    return r < setup_.start_delay_s.size() ? setup_.start_delay_s[r] : 0;
  }
  const CompactSend& SendOf(std::uint64_t tag) const {
    return plans_[tag >> 32].sends[tag & kRankMask];
  }

  void StartMessage(int from, std::uint32_t send) {
    const CompactSend& s = plans_[static_cast<std::size_t>(from)].sends[send];
    sim_.StartFlow(fabric_.HostToHost(from, s.peer),
                   static_cast<double>(s.count) * static_cast<double>(element_size_), setup_.alpha_s,
                   (static_cast<std::uint64_t>(from) << 32) | send);
  }

  // Rank `rank` begins round `round` now: its sends go to receivers already
  // there, wait for the others, and the messages waiting for it go.
  void Enter(int rank, int round) {
    RankState& state = ranks_[static_cast<std::size_t>(rank)];
    const CompactSchedule& plan = plans_[static_cast<std::size_t>(rank)];
    for (;; ++round) {
      state.round = round;
      if (setup_.record_spans && !state.spans.empty()) state.spans.back().end_s = sim_.now();
      if (round == plan.rounds()) {
        state.done = true;
        state.end_s = sim_.now();
        return;
      }
      const std::uint32_t first = plan.round_begin[static_cast<std::size_t>(round)];
      const std::uint32_t last = plan.round_begin[static_cast<std::size_t>(round) + 1];
      if (setup_.record_spans) RecordSpan(rank, round, first, last);
      state.sends_left = last - first;
      state.receives_left = plan.receives[static_cast<std::size_t>(round)];
      for (std::uint32_t i = first; i < last; ++i) {
        RankState& peer = ranks_[static_cast<std::size_t>(plan.sends[i].peer)];
        if (peer.round == round && !peer.done) {
          StartMessage(rank, i);
        } else {
          peer.parked.push_back({round, rank, i});
        }
      }
      for (std::size_t p = 0; p < state.parked.size();) {
        if (state.parked[p].round != round) {
          ++p;
          continue;
        }
        StartMessage(state.parked[p].from, state.parked[p].send);
        state.parked[p] = state.parked.back();
        state.parked.pop_back();
      }
      if (state.sends_left > 0 || state.receives_left > 0) return;
    }
  }

  // A span for each round with traffic; a round without any takes no time.
  void RecordSpan(int rank, int round, std::uint32_t first, std::uint32_t last) {
    RankState& state = ranks_[static_cast<std::size_t>(rank)];
    const CompactSchedule& plan = plans_[static_cast<std::size_t>(rank)];
    const std::uint32_t receives = plan.receives[static_cast<std::size_t>(round)];
    if (first == last && receives == 0) return;
    SimSpan span;
    span.start_s = span.end_s = sim_.now();
    span.round = round;
    span.peer = first < last ? plan.sends[first].peer : -1;
    span.sends = static_cast<std::int32_t>(last - first);
    for (std::uint32_t i = first; i < last; ++i) {
      span.bytes_sent += static_cast<std::int64_t>(plan.sends[i].count) * element_size_;
    }
    state.spans.push_back(span);  // bytes_received grow as its messages arrive
  }

  void RoundWorkDone(int rank) {
    const RankState& state = ranks_[static_cast<std::size_t>(rank)];
    if (state.sends_left == 0 && state.receives_left == 0) Enter(rank, state.round + 1);
  }

  void Handle(const SimEvent& event) {
    if (event.kind == SimEvent::Kind::kTimer) {
      const int rank = static_cast<int>(event.tag & kRankMask);
      if ((event.tag & kStartTimer) != 0) {
        Enter(rank, 0);
      } else {
        --ranks_[static_cast<std::size_t>(rank)].receives_left;
        RoundWorkDone(rank);
      }
      return;
    }
    const int from = static_cast<int>(event.tag >> 32);
    const CompactSend& send = SendOf(event.tag);
    if (setup_.record_spans) {
      // Rendezvous: the receiver is in the message's round until it arrives.
      ranks_[static_cast<std::size_t>(send.peer)].spans.back().bytes_received +=
          static_cast<std::int64_t>(send.count) * element_size_;
    }
    --ranks_[static_cast<std::size_t>(from)].sends_left;
    RoundWorkDone(from);
    if (setup_.host_s_per_byte > 0) {
      sim_.Wake(static_cast<double>(send.count) * static_cast<double>(element_size_) *
                    setup_.host_s_per_byte,
                kAppliedTimer | static_cast<std::uint64_t>(send.peer));
      return;
    }
    --ranks_[static_cast<std::size_t>(send.peer)].receives_left;
    RoundWorkDone(send.peer);
  }

  std::vector<CompactSchedule> plans_;
  std::int64_t element_size_;
  const SimSetup& setup_;
  FlowSimulator sim_;
  SimFabric fabric_;
  std::vector<RankState> ranks_;
};

// Rank `r`'s schedule: in its group when the setup has groups.
Schedule RankSchedule(const Collective& collective, int r, int world_size, std::int64_t count,
                      int root, const SimSetup& setup) {
  if (setup.groups.members.empty()) {
    return collective.Build(r, world_size, count, root, setup.placement);
  }
  return BuildInGroup(collective, setup.groups, r, count, root, setup.placement);
}

// Segmented: each rank's schedule as its segment plan, played op by op.
absl::StatusOr<SimResult> SimulateSegmented(const Collective& collective, int world_size,
                                            std::int64_t count, std::int64_t element_size,
                                            const SimSetup& setup, int root) {
  SimResult result;
  std::vector<SegmentPlan> plans;
  plans.reserve(static_cast<std::size_t>(world_size));
  const std::int64_t segment =
      SegmentElements(setup.segment_bytes, static_cast<std::size_t>(element_size), count);
  for (int r = 0; r < world_size; ++r) {
    const Schedule schedule = RankSchedule(collective, r, world_size, count, root, setup);
    SimRank& rank = result.ranks.emplace_back();
    rank.bytes_sent = schedule.ElementsSent() * element_size;
    rank.bytes_received = schedule.ElementsReceived() * element_size;
    plans.push_back(PlanSegments(schedule, segment));
    result.schedule_bytes += plans.back().ops.capacity() * sizeof(SegmentOp);
  }
  if (absl::Status st = PlaySegmentPlans(plans, element_size, setup, result); !st.ok()) return st;
  return result;
}

}  // namespace

absl::StatusOr<SimResult> SimulateSchedule(const Collective& collective, int world_size,
                                           std::int64_t bytes, std::int64_t element_size,
                                           const SimSetup& setup, int root) {
  if (!collective.has_schedule()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(collective.name), " has no schedule"));
  }
  if (world_size < 1 || element_size < 1 || bytes < 0 || bytes % element_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot simulate ", bytes, " bytes of ",
                                                   element_size, "-byte elements on ",
                                                   world_size, " ranks"));
  }
  if (static_cast<int>(setup.rates.host_bps.size()) != world_size) {
    return absl::InvalidArgumentError(absl::StrCat(setup.rates.host_bps.size(),
                                                   " host links for ", world_size, " ranks"));
  }
  if (absl::Status st = ValidateRackPlacement(setup.placement, world_size); !st.ok()) return st;
  if (!setup.groups.members.empty() && setup.groups.world_size() != world_size) {
    return absl::InvalidArgumentError(absl::StrCat("groups of ", setup.groups.world_size(),
                                                   " ranks for ", world_size));
  }
  const std::int64_t count = bytes / element_size;
  if (count > std::int64_t{UINT32_MAX}) {
    return absl::InvalidArgumentError(absl::StrCat(count, " elements is over the simulator's ",
                                                   UINT32_MAX, " per rank"));
  }
  if (setup.segment_bytes > 0) {
    return SimulateSegmented(collective, world_size, count, element_size, setup, root);
  }
  SimResult result;
  std::vector<CompactSchedule> plans;
  plans.reserve(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    plans.push_back(Compact(RankSchedule(collective, r, world_size, count, root, setup)));
    const CompactSchedule& plan = plans.back();
    SimRank rank;
    for (const CompactSend& send : plan.sends) rank.bytes_sent += send.count * element_size;
    rank.bytes_received = plan.elements_received * element_size;
    result.ranks.push_back(rank);
    result.schedule_bytes += plan.MemoryBytes();
  }
  ScheduleRun run(std::move(plans), element_size, setup);
  absl::StatusOr<std::vector<double>> times = run.Run();
  if (!times.ok()) return times.status();
  for (std::size_t r = 0; r < times->size(); ++r) {
    result.ranks[r].time_s = (*times)[r];
    result.ranks[r].spans = run.TakeSpans(static_cast<int>(r));
  }
  result.flows = run.sim().flows_started();
  result.rate_solves = run.sim().rate_solves();
  return result;
}

}  // namespace testbed
