#include "allreduce/simulator/flow_simulator.h"

#include <algorithm>
#include <cassert>

namespace testbed {
namespace {

// Two flows whose ends differ by less than this (relative to the clock) end
// together: identical flows of a symmetric round must not cost one event
// each for the last bits of rounding.
constexpr double kSameInstant = 1e-12;
// Links whose fair share is within this of the tightest saturate together.
constexpr double kSameShare = 1e-9;

double Latest(double time) { return time + kSameInstant * time + 1e-15; }

}  // namespace

int FlowSimulator::AddLink(double bytes_per_s) {
  assert(bytes_per_s > 0);
  capacity_.push_back(bytes_per_s);
  on_link_.emplace_back();
  link_mark_.push_back(0);
  left_.push_back(0);
  unfrozen_on_.push_back(0);
  saturated_.push_back(0);
  return static_cast<int>(capacity_.size()) - 1;
}

std::uint32_t FlowSimulator::NewFlow() {
  if (!free_flows_.empty()) {
    const std::uint32_t id = free_flows_.back();
    free_flows_.pop_back();
    return id;
  }
  flows_.emplace_back();
  flow_mark_.push_back(0);
  new_rate_.push_back(0);
  return static_cast<std::uint32_t>(flows_.size() - 1);
}

void FlowSimulator::StartFlow(const FlowPath& path, double bytes, double delay_s,
                              std::uint64_t tag) {
  const std::uint32_t id = NewFlow();
  Flow& flow = flows_[id];
  flow.path = path;
  flow.remaining = std::max(bytes, 0.0);
  flow.rate = 0;
  flow.tag = tag;
  flow.live = false;
  ++flow.version;
  delay_s = std::max(delay_s, 0.0);
  auto queue = std::find_if(arrivals_.begin(), arrivals_.end(),
                            [&](const DelayQueue& q) { return q.delay == delay_s; });
  if (queue == arrivals_.end()) queue = arrivals_.insert(arrivals_.end(), DelayQueue{delay_s, {}});
  queue->arrivals.push_back({now_ + delay_s, id});
}

void FlowSimulator::Wake(double delay_s, std::uint64_t tag) {
  timers_.push(Timer{now_ + std::max(delay_s, 0.0), sequence_++, tag});
}

void FlowSimulator::Enter(std::uint32_t id) {
  Flow& flow = flows_[id];
  flow.live = true;
  flow.since = now_;
  for (int k = 0; k < flow.path.size; ++k) {
    const std::int32_t link = flow.path.links[static_cast<std::size_t>(k)];
    on_link_[link].push_back(id);
    dirty_.push_back(link);
  }
}

void FlowSimulator::Finish(std::uint32_t id) {
  Flow& flow = flows_[id];
  flow.live = false;
  ++flow.version;
  for (int k = 0; k < flow.path.size; ++k) dirty_.push_back(flow.path.links[static_cast<std::size_t>(k)]);
  finished_.push_back(id);
}

// The flows and links whose rates a change on the dirty links may move:
// everything reachable from them through links that flows share. Finished
// flows are dropped from the lists of the links it passes (every link of a
// finished flow is dirty, so each list is clean before a finished id is reused).
void FlowSimulator::CollectComponent() {
  ++epoch_;
  component_links_.clear();
  component_flows_.clear();
  for (std::int32_t link : dirty_) {
    if (link_mark_[link] == epoch_) continue;
    link_mark_[link] = epoch_;
    component_links_.push_back(link);
  }
  dirty_.clear();
  for (std::size_t i = 0; i < component_links_.size(); ++i) {
    std::vector<std::uint32_t>& on_link = on_link_[component_links_[i]];
    std::erase_if(on_link, [&](std::uint32_t id) { return !flows_[id].live; });
    for (std::uint32_t id : on_link) {
      if (flow_mark_[id] == epoch_) continue;
      flow_mark_[id] = epoch_;
      component_flows_.push_back(id);
      const FlowPath& path = flows_[id].path;
      for (int k = 0; k < path.size; ++k) {
        const std::int32_t other = path.links[static_cast<std::size_t>(k)];
        if (link_mark_[other] == epoch_) continue;
        link_mark_[other] = epoch_;
        component_links_.push_back(other);
      }
    }
  }
}

// Progressive filling over the component: raise every unfrozen flow's rate
// together until a link is full; the flows through it are frozen at that
// rate, the rest go on with what is left of their links.
void FlowSimulator::SolveRates() {
  ++rate_solves_;
  CollectComponent();
  for (std::int32_t link : component_links_) {
    left_[link] = capacity_[link];
    unfrozen_on_[link] = static_cast<std::int32_t>(on_link_[link].size());
  }
  unfrozen_ = component_flows_;
  while (!unfrozen_.empty()) {
    double share = kNever;
    for (std::int32_t link : component_links_) {
      if (unfrozen_on_[link] > 0) share = std::min(share, left_[link] / unfrozen_on_[link]);
    }
    for (std::int32_t link : component_links_) {
      saturated_[link] =
          unfrozen_on_[link] > 0 && left_[link] / unfrozen_on_[link] <= share * (1 + kSameShare);
    }
    std::size_t kept = 0;
    for (std::uint32_t id : unfrozen_) {
      const FlowPath& path = flows_[id].path;
      bool bottlenecked = false;
      for (int k = 0; k < path.size && !bottlenecked; ++k) {
        bottlenecked = saturated_[path.links[static_cast<std::size_t>(k)]] != 0;
      }
      if (!bottlenecked) {
        unfrozen_[kept++] = id;
        continue;
      }
      new_rate_[id] = share;
      for (int k = 0; k < path.size; ++k) {
        const std::int32_t link = path.links[static_cast<std::size_t>(k)];
        left_[link] = std::max(0.0, left_[link] - share);
        --unfrozen_on_[link];
      }
    }
    unfrozen_.resize(kept);
  }
  for (std::uint32_t id : component_flows_) {
    Flow& flow = flows_[id];
    if (new_rate_[id] == flow.rate) continue;
    flow.remaining = std::max(0.0, flow.remaining - flow.rate * (now_ - flow.since));
    flow.since = now_;
    flow.rate = new_rate_[id];
    ++flow.version;
    ends_.push(End{now_ + flow.remaining / flow.rate, id, flow.version});
  }
  free_flows_.insert(free_flows_.end(), finished_.begin(), finished_.end());
  finished_.clear();
}

double FlowSimulator::NextFlowEnd() {
  while (!ends_.empty() && flows_[ends_.top().flow].version != ends_.top().version) ends_.pop();
  return ends_.empty() ? kNever : ends_.top().time;
}

FlowSimulator::DelayQueue* FlowSimulator::EarliestArrival() {
  DelayQueue* earliest = nullptr;
  for (DelayQueue& queue : arrivals_) {
    if (!queue.arrivals.empty() &&
        (earliest == nullptr || queue.arrivals.front().time < earliest->arrivals.front().time)) {
      earliest = &queue;
    }
  }
  return earliest;
}

bool FlowSimulator::Next(std::vector<SimEvent>& events) {
  if (!dirty_.empty()) SolveRates();
  DelayQueue* arrival = EarliestArrival();
  const double time = std::min({NextFlowEnd(), arrival ? arrival->arrivals.front().time : kNever,
                                timers_.empty() ? kNever : timers_.top().time});
  if (time == kNever) return false;
  now_ = time;
  const double latest = Latest(time);
  while (NextFlowEnd() <= latest) {
    const std::uint32_t id = ends_.top().flow;
    ends_.pop();
    events.push_back({SimEvent::Kind::kFlowEnded, flows_[id].tag});
    Finish(id);
  }
  while (!timers_.empty() && timers_.top().time <= latest) {
    events.push_back({SimEvent::Kind::kTimer, timers_.top().tag});
    timers_.pop();
  }
  for (DelayQueue& queue : arrivals_) {
    while (!queue.arrivals.empty() && queue.arrivals.front().time <= latest) {
      const std::uint32_t id = queue.arrivals.front().flow;
      queue.arrivals.pop_front();
      ++flows_started_;
      Flow& flow = flows_[id];
      if (flow.path.size == 0 || flow.remaining == 0) {
        // Nothing shaped in the way: it is there as it enters.
        events.push_back({SimEvent::Kind::kFlowEnded, flow.tag});
        ++flow.version;
        free_flows_.push_back(id);
      } else {
        Enter(id);
      }
    }
  }
  return true;
}

}  // namespace testbed
