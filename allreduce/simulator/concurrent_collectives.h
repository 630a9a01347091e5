// Collectives that run at the same time on one fabric, sharing its links:
// what a training step's replay needs (experiments/workload/step_simulation.h),
// where a pipeline's hand-offs, a stage's tensor-parallel all-reduces and the
// data-parallel buckets overlap. Each collective is a job of its schedules
// (allreduce/simulator/schedule_job.h) started when its caller says, on the
// same FlowSimulator, so flows of different collectives on a link share it
// max-min fairly as a collective's own flows do (docs/simulator.md). Round by
// round, as SimulateSchedule plays an unsegmented schedule; a collective
// played here alone takes the time SimulateSchedule gives it.
//
// Thread-safety: a plain object, one thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "allreduce/collective.h"
#include "allreduce/rank_groups.h"
#include "allreduce/simulator/flow_simulator.h"
#include "allreduce/simulator/schedule_job.h"
#include "allreduce/simulator/sim_fabric.h"
#include "allreduce/simulator/simulation.h"

namespace testbed {

class ConcurrentCollectives {
 public:
  // The fabric of `setup` for `world_size` ranks (placement, rates, alpha,
  // host cost); its groups, start delays and segments are not used here.
  ConcurrentCollectives(int world_size, const SimSetup& setup);

  // `collective` over `bytes` on every rank, each group of `groups` among its
  // own ranks, starting now; `tag` (below 2^62) comes back from Next when its
  // last rank ended. `groups` must outlive this object: its schedules are
  // built once per (collective, bytes, groups, root) and kept.
  absl::Status Start(const Collective& collective, std::int64_t bytes, std::int64_t element_size,
                     const RankGroups& groups, int root, std::uint64_t tag);
  // A timer: `tag` (below 2^62) comes back `delay_s` from now.
  void Wake(double delay_s, std::uint64_t tag);

  // Advances to the next instant something ended and appends the tags of
  // what did; false once nothing is left. An error where a collective's
  // schedules do not match.
  absl::StatusOr<bool> Next(std::vector<std::uint64_t>& ended);

  double now() const { return sim_.now(); }

 private:
  using PlanKey = std::tuple<const Collective*, std::int64_t, std::int64_t, const RankGroups*, int>;
  struct Running {
    std::unique_ptr<ScheduleJob> job;
    std::uint64_t tag = 0;
  };

  absl::StatusOr<std::shared_ptr<const CompactSchedules>> PlanOf(const PlanKey& key);

  int world_size_;
  SimSetup setup_;  // without groups or start delays
  FlowSimulator sim_;
  SimFabric fabric_;
  std::map<PlanKey, std::shared_ptr<const CompactSchedules>> plans_;
  std::vector<Running> running_;  // by job id; a finished one's job is released
  std::vector<SimEvent> events_;
};

}  // namespace testbed
