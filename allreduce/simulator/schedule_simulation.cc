// SimulateSchedule (allreduce/simulator/simulation.h): every rank's schedule,
// kept compact, played round by round on the fabric's flows as one job
// (allreduce/simulator/schedule_job.h) alone on its links.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/segment_plan.h"
#include "allreduce/simulator/flow_simulator.h"
#include "allreduce/simulator/schedule_job.h"
#include "allreduce/simulator/segment_simulation.h"
#include "allreduce/simulator/sim_fabric.h"
#include "allreduce/simulator/simulation.h"
#include "common/limits.h"

namespace testbed {
namespace {

// What a segment plan holds in memory: its operations and their dependents.
std::int64_t PlanBytes(const SegmentPlan& plan) {
  auto bytes = static_cast<std::int64_t>(plan.ops.capacity() * sizeof(SegmentOp));
  for (const SegmentOp& op : plan.ops) {
    bytes += static_cast<std::int64_t>(op.dependents.capacity() * sizeof(std::uint32_t));
  }
  return bytes;
}

// Segmented: each rank's schedule as its segment plan, played op by op.
// Refused, before the memory runs out, where the plans would hold more than
// kMaxSegmentPlanBytes (judged from the first rank's, then counted).
absl::StatusOr<SimResult> SimulateSegmented(const Collective& collective, int world_size,
                                            std::int64_t count, std::int64_t element_size,
                                            const SimSetup& setup, int root) {
  SimResult result;
  std::vector<SegmentPlan> plans;
  plans.reserve(static_cast<std::size_t>(world_size));
  const std::int64_t segment =
      SegmentElements(setup.segment_bytes, static_cast<std::size_t>(element_size), count);
  std::int64_t plan_bytes = 0;
  for (int r = 0; r < world_size; ++r) {
    const Schedule schedule =
        RankSchedule(collective, setup.groups, setup.placement, r, world_size, count, root);
    SimRank& rank = result.ranks.emplace_back();
    rank.bytes_sent = schedule.ElementsSent() * element_size;
    rank.bytes_received = schedule.ElementsReceived() * element_size;
    plans.push_back(PlanSegments(schedule, segment));
    const std::int64_t bytes = PlanBytes(plans.back());
    plan_bytes += bytes;
    result.schedule_bytes += static_cast<std::uint64_t>(bytes);
    if (plan_bytes > kMaxSegmentPlanBytes || bytes * world_size > kMaxSegmentPlanBytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the segment plans of ", std::string(collective.name), " on ", world_size,
          " ranks would hold about ", std::max(plan_bytes, bytes * world_size) >> 20,
          " MiB, over the simulator's ", kMaxSegmentPlanBytes >> 20, " MiB (",
          segment * element_size, "-byte segments); simulate it with --segment off or larger "
          "segments"));
    }
  }
  if (absl::Status st = PlaySegmentPlans(plans, element_size, setup, result); !st.ok()) return st;
  return result;
}

}  // namespace

absl::StatusOr<SimResult> SimulateSchedule(const Collective& collective, int world_size,
                                           std::int64_t bytes, std::int64_t element_size,
                                           const SimSetup& setup, int root) {
  if (absl::Status st = CheckPlayable(collective, world_size, bytes, element_size, setup.groups);
      !st.ok()) {
    return st;
  }
  if (static_cast<int>(setup.rates.host_bps.size()) != world_size) {
    return absl::InvalidArgumentError(absl::StrCat(setup.rates.host_bps.size(),
                                                   " host links for ", world_size, " ranks"));
  }
  if (absl::Status st = ValidateRackPlacement(setup.placement, world_size); !st.ok()) return st;
  const std::int64_t count = bytes / element_size;
  if (setup.segment_bytes > 0) {
    return SimulateSegmented(collective, world_size, count, element_size, setup, root);
  }
  absl::StatusOr<CompactSchedules> plans =
      CompactSchedulesOf(collective, setup.groups, setup.placement, world_size, count, root);
  if (!plans.ok()) return plans.status();
  SimResult result;
  for (const CompactSchedule& plan : *plans) {
    SimRank rank;
    for (const CompactSend& send : plan.sends) rank.bytes_sent += send.count * element_size;
    rank.bytes_received = plan.elements_received * element_size;
    result.ranks.push_back(rank);
    result.schedule_bytes += plan.MemoryBytes();
  }
  FlowSimulator sim;
  const SimFabric fabric(sim, world_size, setup.placement, setup.rates);
  ScheduleJob job(std::make_shared<const CompactSchedules>(*std::move(plans)), element_size, setup,
                  sim, fabric, 0);
  std::vector<SimEvent> events;
  while (sim.Next(events)) {
    for (const SimEvent& event : events) job.Handle(event);
    events.clear();
  }
  absl::StatusOr<std::vector<double>> times = job.Times();
  if (!times.ok()) return times.status();
  for (std::size_t r = 0; r < times->size(); ++r) {
    result.ranks[r].time_s = (*times)[r];
    result.ranks[r].spans = job.TakeSpans(static_cast<int>(r));
  }
  result.flows = sim.flows_started();
  result.rate_solves = sim.rate_solves();
  return result;
}

}  // namespace testbed
