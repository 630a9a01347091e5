// One collective's schedules played round by round on a FlowSimulator's
// flows (allreduce/simulator/simulation.h's model): its ranks, their rounds
// and the messages between them, as a job among others on the same links.
// SimulateSchedule plays one job alone; ConcurrentCollectives
// (allreduce/simulator/concurrent_collectives.h) plays several at once, so
// they share the fabric. Each rank's schedule is kept compact - per round its
// sends (peer, elements) and how many messages it receives.
//
// Every event a job causes carries its job id in its tag (JobOfTag), so the
// owner hands each event to its job.
//
// Thread-safety: plain objects, one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/status/status.h"
#include "allreduce/collective.h"
#include "allreduce/placement.h"
#include "allreduce/rank_groups.h"
#include "allreduce/schedule.h"
#include "allreduce/simulator/flow_simulator.h"
#include "allreduce/simulator/sim_fabric.h"
#include "allreduce/simulator/simulation.h"

namespace testbed {

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

// Refused where a rank has more sends than a tag can name (kMaxJobSends).
absl::StatusOr<CompactSchedule> Compact(const Schedule& schedule);

// Every world rank's compact schedule (a rank outside the collective's
// groups has none), shared by the jobs that play it.
using CompactSchedules = std::vector<CompactSchedule>;

// OK where `collective` can be played over `bytes` of `element_size`-byte
// elements on `world_size` ranks in `groups` (no members: the world): it
// has a schedule, the sizes fit, and a rank's count fits a CompactSend.
absl::Status CheckPlayable(const Collective& collective, int world_size, std::int64_t bytes,
                           std::int64_t element_size, const RankGroups& groups);

// Rank `r`'s schedule: in its group, where `groups` has members.
Schedule RankSchedule(const Collective& collective, const RankGroups& groups,
                      const Placement& placement, int r, int world_size, std::int64_t count,
                      int root);

// Every rank's schedule, compact.
absl::StatusOr<CompactSchedules> CompactSchedulesOf(const Collective& collective,
                                                    const RankGroups& groups,
                                                    const Placement& placement, int world_size,
                                                    std::int64_t count, int root);

// Tags: bits 62-63 the kind of event, 40-61 the job, 26-39 the rank, 0-25
// a send's index in its rank's schedule.
inline constexpr int kMaxJobs = 1 << 22;
inline constexpr int kMaxJobRanks = 1 << 14;
inline constexpr std::uint32_t kMaxJobSends = 1u << 26;
inline constexpr std::uint64_t kOwnerTimer = std::uint64_t{3} << 62;  // the owner's, not a job's
std::uint32_t JobOfTag(std::uint64_t tag);

class ScheduleJob {
 public:
  // Ranks begin now, a slow rank setup.start_delay_s late; `setup` and the
  // others outlive the job.
  ScheduleJob(std::shared_ptr<const CompactSchedules> plans, std::int64_t element_size,
              const SimSetup& setup, FlowSimulator& sim, const SimFabric& fabric,
              std::uint32_t job);

  void Handle(const SimEvent& event);  // one of this job's events
  bool finished() const { return ranks_left_ == 0; }
  // Each rank's time from its own start to its end; an error where a rank
  // waits forever (the schedules do not match).
  absl::StatusOr<std::vector<double>> Times() const;
  std::vector<SimSpan> TakeSpans(int rank);

 private:
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

  double StartDelay(int rank) const;
  std::uint64_t Tag(std::uint64_t kind, int rank, std::uint32_t send) const;
  void StartMessage(int from, std::uint32_t send);
  void Enter(int rank, int round);
  void RecordSpan(int rank, int round, std::uint32_t first, std::uint32_t last);
  void RoundWorkDone(int rank);

  std::shared_ptr<const CompactSchedules> plans_;
  std::int64_t element_size_;
  const SimSetup& setup_;
  FlowSimulator& sim_;
  const SimFabric& fabric_;
  std::uint32_t job_;
  double start_s_;
  int ranks_left_ = 0;
  std::vector<RankState> ranks_;
};

}  // namespace testbed
