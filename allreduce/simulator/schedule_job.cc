#include "allreduce/simulator/schedule_job.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/limits.h"

namespace testbed {
namespace {

static_assert(kMaxSimulatedWorkers <= kMaxJobRanks, "a tag names every simulated rank");

// The kinds of a job's timers: a receive applied after its host cost, a late
// rank's start. A flow's tag has kind 0 (flows and timers come apart in SimEvent).
constexpr std::uint64_t kAppliedTimer = std::uint64_t{1} << 62;
constexpr std::uint64_t kStartTimer = std::uint64_t{2} << 62;
constexpr std::uint64_t kKindMask = std::uint64_t{3} << 62;
constexpr int kJobShift = 40;
constexpr int kRankShift = 26;

int RankOfTag(std::uint64_t tag) {
  return static_cast<int>((tag >> kRankShift) & (kMaxJobRanks - 1));
}
std::uint32_t SendOfTag(std::uint64_t tag) {
  return static_cast<std::uint32_t>(tag & (kMaxJobSends - 1));
}

}  // namespace

std::uint32_t JobOfTag(std::uint64_t tag) {
  return static_cast<std::uint32_t>((tag >> kJobShift) & (kMaxJobs - 1));
}

absl::StatusOr<CompactSchedule> Compact(const Schedule& schedule) {
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
  if (compact.sends.size() >= kMaxJobSends) {
    return absl::InvalidArgumentError(absl::StrCat("a rank of ", compact.sends.size(),
                                                   " sends is over the simulator's ",
                                                   kMaxJobSends));
  }
  compact.round_begin.push_back(static_cast<std::uint32_t>(compact.sends.size()));
  compact.sends.shrink_to_fit();
  return compact;
}

absl::Status CheckPlayable(const Collective& collective, int world_size, std::int64_t bytes,
                           std::int64_t element_size, const RankGroups& groups) {
  if (!collective.has_schedule()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(collective.name), " has no schedule"));
  }
  if (world_size < 1 || element_size < 1 || bytes < 0 || bytes % element_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot simulate ", bytes, " bytes of ",
                                                   element_size, "-byte elements on ",
                                                   world_size, " ranks"));
  }
  if (!groups.members.empty() && groups.world_size() != world_size) {
    return absl::InvalidArgumentError(absl::StrCat("groups of ", groups.world_size(),
                                                   " ranks for ", world_size));
  }
  if (const std::int64_t count = bytes / element_size; count > std::int64_t{UINT32_MAX}) {
    return absl::InvalidArgumentError(absl::StrCat(count, " elements is over the simulator's ",
                                                   UINT32_MAX, " per rank"));
  }
  return absl::OkStatus();
}

Schedule RankSchedule(const Collective& collective, const RankGroups& groups,
                      const Placement& placement, int r, int world_size, std::int64_t count,
                      int root) {
  if (groups.members.empty()) return collective.Build(r, world_size, count, root, placement);
  return BuildInGroup(collective, groups, r, count, root, placement);
}

absl::StatusOr<CompactSchedules> CompactSchedulesOf(const Collective& collective,
                                                    const RankGroups& groups,
                                                    const Placement& placement, int world_size,
                                                    std::int64_t count, int root) {
  CompactSchedules plans;
  plans.reserve(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    absl::StatusOr<CompactSchedule> plan =
        Compact(RankSchedule(collective, groups, placement, r, world_size, count, root));
    if (!plan.ok()) return plan.status();
    plans.push_back(*std::move(plan));
  }
  return plans;
}

ScheduleJob::ScheduleJob(std::shared_ptr<const CompactSchedules> plans, std::int64_t element_size,
                         const SimSetup& setup, FlowSimulator& sim, const SimFabric& fabric,
                         std::uint32_t job)
    : plans_(std::move(plans)),
      element_size_(element_size),
      setup_(setup),
      sim_(sim),
      fabric_(fabric),
      job_(job),
      start_s_(sim.now()),
      ranks_left_(static_cast<int>(plans_->size())),
      ranks_(plans_->size()) {
  for (int r = 0; r < static_cast<int>(plans_->size()); ++r) {
    if (const double delay = StartDelay(r); delay > 0) {
      sim_.Wake(delay, Tag(kStartTimer, r, 0));
    } else {
      Enter(r, 0);
    }
  }
}

absl::StatusOr<std::vector<double>> ScheduleJob::Times() const {
  std::vector<double> times;
  for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
    const RankState& state = ranks_[static_cast<std::size_t>(r)];
    if (!state.done) {
      return absl::InternalError(absl::StrCat("the schedules do not match: rank ", r,
                                              " waits forever in round ", state.round));
    }
    times.push_back(state.end_s - start_s_ - StartDelay(r));
  }
  return times;
}

std::vector<SimSpan> ScheduleJob::TakeSpans(int rank) {
  return std::move(ranks_[static_cast<std::size_t>(rank)].spans);
}

double ScheduleJob::StartDelay(int rank) const {
  const auto r = static_cast<std::size_t>(rank);
  return r < setup_.start_delay_s.size() ? setup_.start_delay_s[r] : 0;
}

std::uint64_t ScheduleJob::Tag(std::uint64_t kind, int rank, std::uint32_t send) const {
  return kind | (static_cast<std::uint64_t>(job_) << kJobShift) |
         (static_cast<std::uint64_t>(rank) << kRankShift) | send;
}

void ScheduleJob::StartMessage(int from, std::uint32_t send) {
  const CompactSend& s = (*plans_)[static_cast<std::size_t>(from)].sends[send];
  sim_.StartFlow(fabric_.HostToHost(from, s.peer),
                 static_cast<double>(s.count) * static_cast<double>(element_size_), setup_.alpha_s,
                 Tag(0, from, send));
}

// Rank `rank` begins round `round` now: its sends go to receivers already
// there, wait for the others, and the messages waiting for it go.
void ScheduleJob::Enter(int rank, int round) {
  RankState& state = ranks_[static_cast<std::size_t>(rank)];
  const CompactSchedule& plan = (*plans_)[static_cast<std::size_t>(rank)];
  for (;; ++round) {
    state.round = round;
    if (setup_.record_spans && !state.spans.empty()) state.spans.back().end_s = sim_.now();
    if (round == plan.rounds()) {
      state.done = true;
      state.end_s = sim_.now();
      --ranks_left_;
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
void ScheduleJob::RecordSpan(int rank, int round, std::uint32_t first, std::uint32_t last) {
  RankState& state = ranks_[static_cast<std::size_t>(rank)];
  const CompactSchedule& plan = (*plans_)[static_cast<std::size_t>(rank)];
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

void ScheduleJob::RoundWorkDone(int rank) {
  const RankState& state = ranks_[static_cast<std::size_t>(rank)];
  if (state.sends_left == 0 && state.receives_left == 0) Enter(rank, state.round + 1);
}

void ScheduleJob::Handle(const SimEvent& event) {
  if (event.kind == SimEvent::Kind::kTimer) {
    const int rank = RankOfTag(event.tag);
    if ((event.tag & kKindMask) == kStartTimer) {
      Enter(rank, 0);
    } else {
      --ranks_[static_cast<std::size_t>(rank)].receives_left;
      RoundWorkDone(rank);
    }
    return;
  }
  const int from = RankOfTag(event.tag);
  const CompactSend& send = (*plans_)[static_cast<std::size_t>(from)].sends[SendOfTag(event.tag)];
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
              Tag(kAppliedTimer, send.peer, 0));
    return;
  }
  --ranks_[static_cast<std::size_t>(send.peer)].receives_left;
  RoundWorkDone(send.peer);
}

}  // namespace testbed
