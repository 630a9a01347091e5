#include "allreduce/simulator/concurrent_collectives.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

SimSetup FabricOnly(SimSetup setup) {
  setup.groups = {};
  setup.start_delay_s.clear();
  setup.segment_bytes = 0;
  setup.record_spans = false;
  return setup;
}

}  // namespace

ConcurrentCollectives::ConcurrentCollectives(int world_size, const SimSetup& setup)
    : world_size_(world_size),
      setup_(FabricOnly(setup)),
      fabric_(sim_, world_size, setup_.placement, setup_.rates) {}

absl::StatusOr<std::shared_ptr<const CompactSchedules>> ConcurrentCollectives::PlanOf(
    const PlanKey& key) {
  if (const auto found = plans_.find(key); found != plans_.end()) return found->second;
  const auto& [collective, bytes, element_size, groups, root] = key;
  absl::StatusOr<CompactSchedules> plans = CompactSchedulesOf(
      *collective, *groups, setup_.placement, world_size_, bytes / element_size, root);
  if (!plans.ok()) return plans.status();
  auto shared = std::make_shared<const CompactSchedules>(*std::move(plans));
  plans_.emplace(key, shared);
  return shared;
}

absl::Status ConcurrentCollectives::Start(const Collective& collective, std::int64_t bytes,
                                          std::int64_t element_size, const RankGroups& groups,
                                          int root, std::uint64_t tag) {
  if (absl::Status st = CheckPlayable(collective, world_size_, bytes, element_size, groups);
      !st.ok()) {
    return st;
  }
  if (groups.world_size() != world_size_) {  // the world needs its groups here
    return absl::InvalidArgumentError(
        absl::StrCat("groups of ", groups.world_size(), " ranks for ", world_size_));
  }
  if (running_.size() >= static_cast<std::size_t>(kMaxJobs)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("more than ", kMaxJobs, " collectives in one simulation"));
  }
  absl::StatusOr<std::shared_ptr<const CompactSchedules>> plans =
      PlanOf({&collective, bytes, element_size, &groups, root});
  if (!plans.ok()) return plans.status();
  const auto id = static_cast<std::uint32_t>(running_.size());
  Running& running = running_.emplace_back();
  running.tag = tag;
  running.job =
      std::make_unique<ScheduleJob>(*std::move(plans), element_size, setup_, sim_, fabric_, id);
  // A collective with nothing to move (every group a single rank) ends at once.
  if (running.job->finished()) {
    Wake(0, tag);
    running.job.reset();
  }
  return absl::OkStatus();
}

void ConcurrentCollectives::Wake(double delay_s, std::uint64_t tag) {
  sim_.Wake(delay_s, kOwnerTimer | tag);
}

absl::StatusOr<bool> ConcurrentCollectives::Next(std::vector<std::uint64_t>& ended) {
  while (true) {
    events_.clear();
    if (!sim_.Next(events_)) {
      for (const Running& running : running_) {
        if (running.job == nullptr) continue;
        absl::StatusOr<std::vector<double>> times = running.job->Times();
        return times.ok() ? absl::InternalError("a collective never ended") : times.status();
      }
      return false;
    }
    const std::size_t before = ended.size();
    for (const SimEvent& event : events_) {
      if (event.kind == SimEvent::Kind::kTimer && (event.tag & kOwnerTimer) == kOwnerTimer) {
        ended.push_back(event.tag & ~kOwnerTimer);
        continue;
      }
      Running& running = running_[JobOfTag(event.tag)];
      running.job->Handle(event);
      if (running.job->finished()) {
        ended.push_back(running.tag);
        running.job.reset();
      }
    }
    if (ended.size() > before) return true;
  }
}

}  // namespace testbed
