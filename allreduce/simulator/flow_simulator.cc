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
  left_.push_back(0);
  unfrozen_on_.push_back(0);
  saturated_.push_back(0);
  return static_cast<int>(capacity_.size()) - 1;
}

void FlowSimulator::StartFlow(const FlowPath& path, double bytes, double delay_s,
                              std::uint64_t tag) {
  std::uint32_t index;
  if (free_waiting_.empty()) {
    index = static_cast<std::uint32_t>(waiting_.size());
    waiting_.push_back({});
  } else {
    index = free_waiting_.back();
    free_waiting_.pop_back();
  }
  waiting_[index] = Flow{path, std::max(bytes, 0.0), 0, tag};
  pending_.push(Pending{now_ + std::max(delay_s, 0.0), sequence_++, true, index, tag});
}

void FlowSimulator::Wake(double delay_s, std::uint64_t tag) {
  pending_.push(Pending{now_ + std::max(delay_s, 0.0), sequence_++, false, 0, tag});
}

// Progressive filling: raise every unfrozen flow's rate together until a
// link is full; the flows through it are frozen at that rate, the rest go on
// with what is left of their links.
void FlowSimulator::SolveRates() {
  ++rate_solves_;
  rates_stale_ = false;
  touched_.clear();
  unfrozen_.clear();
  for (std::uint32_t i = 0; i < flows_.size(); ++i) {
    unfrozen_.push_back(i);
    const FlowPath& path = flows_[i].path;
    for (int k = 0; k < path.size; ++k) {
      const std::int32_t link = path.links[static_cast<std::size_t>(k)];
      if (unfrozen_on_[link]++ == 0) {
        touched_.push_back(link);
        left_[link] = capacity_[link];
      }
    }
  }
  while (!unfrozen_.empty()) {
    double share = kNever;
    for (std::int32_t link : touched_) {
      if (unfrozen_on_[link] > 0) share = std::min(share, left_[link] / unfrozen_on_[link]);
    }
    for (std::int32_t link : touched_) {
      saturated_[link] =
          unfrozen_on_[link] > 0 && left_[link] / unfrozen_on_[link] <= share * (1 + kSameShare);
    }
    std::size_t kept = 0;
    for (std::uint32_t i : unfrozen_) {
      Flow& flow = flows_[i];
      bool bottlenecked = false;
      for (int k = 0; k < flow.path.size && !bottlenecked; ++k) {
        bottlenecked = saturated_[flow.path.links[static_cast<std::size_t>(k)]] != 0;
      }
      if (!bottlenecked) {
        unfrozen_[kept++] = i;
        continue;
      }
      flow.rate = share;
      for (int k = 0; k < flow.path.size; ++k) {
        const std::int32_t link = flow.path.links[static_cast<std::size_t>(k)];
        left_[link] = std::max(0.0, left_[link] - share);
        --unfrozen_on_[link];
      }
    }
    unfrozen_.resize(kept);
  }
}

double FlowSimulator::NextFlowEnd() const {
  double earliest = kNever;
  for (const Flow& flow : flows_) earliest = std::min(earliest, now_ + flow.remaining / flow.rate);
  return earliest;
}

void FlowSimulator::MoveFlowsTo(double time, std::vector<SimEvent>& events) {
  const double elapsed = time - now_;
  const double latest = Latest(time);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < flows_.size(); ++i) {
    Flow& flow = flows_[i];
    if (now_ + flow.remaining / flow.rate <= latest) {
      events.push_back({SimEvent::Kind::kFlowEnded, flow.tag});
      rates_stale_ = true;
      continue;
    }
    flow.remaining -= flow.rate * elapsed;
    if (kept != i) flows_[kept] = flow;
    ++kept;
  }
  flows_.resize(kept);
}

bool FlowSimulator::Next(std::vector<SimEvent>& events) {
  if (rates_stale_) SolveRates();
  const double flow_end = NextFlowEnd();
  const double entry = pending_.empty() ? kNever : pending_.top().time;
  const double time = std::min(flow_end, entry);
  if (time == kNever) return false;
  MoveFlowsTo(time, events);
  now_ = time;
  const double latest = Latest(time);
  while (!pending_.empty() && pending_.top().time <= latest) {
    const Pending next = pending_.top();
    pending_.pop();
    if (!next.is_flow) {
      events.push_back({SimEvent::Kind::kTimer, next.tag});
      continue;
    }
    ++flows_started_;
    Flow& flow = waiting_[next.index];
    if (flow.path.size == 0 || flow.remaining == 0) {
      events.push_back({SimEvent::Kind::kFlowEnded, flow.tag});
    } else {
      flows_.push_back(flow);
      rates_stale_ = true;
    }
    free_waiting_.push_back(next.index);
  }
  return true;
}

}  // namespace testbed
