// The discrete-event core of the simulator (docs/simulator.md): links of
// fixed capacity, flows of bytes over paths of them, and timers. Flows in
// flight share each link max-min fairly (progressive filling: every flow gets
// the same share of its tightest link, and what a flow cannot use of a
// looser link goes to the others there), so a link carrying k flows gives
// each 1/k of its rate unless a flow is held back elsewhere. Rates are
// recomputed only when the set of flows changes; between events every flow
// moves at its rate. Events at the same instant come out together, so the N
// flows of a symmetric round cost one rate solve, not N.
//
// Time is in seconds from 0, bytes are doubles: the fluid model, no packets.
//
// Thread-safety: a plain object, one thread.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <queue>
#include <vector>

namespace testbed {

// The links one flow crosses, in order: a host's link up, its rack's uplink,
// the other rack's downlink, the other host's link down - four at most.
struct FlowPath {
  std::array<std::int32_t, 4> links{};
  int size = 0;
  void Add(int link) { links[static_cast<std::size_t>(size++)] = link; }
};

// What Next() hands back: a flow that finished, or a timer that rang.
struct SimEvent {
  enum class Kind : std::uint8_t { kFlowEnded, kTimer };
  Kind kind;
  std::uint64_t tag;
};

class FlowSimulator {
 public:
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  // A link of `bytes_per_s` (> 0); returns its index for FlowPath.
  int AddLink(double bytes_per_s);
  int links() const { return static_cast<int>(capacity_.size()); }

  // A flow of `bytes` over `path` that enters the network `delay_s` from
  // now (a message's latency); its tag comes back from Next() when its last
  // byte arrived. A path of no links (nothing shaped in the way) moves at
  // once: the flow ends when it enters.
  void StartFlow(const FlowPath& path, double bytes, double delay_s, std::uint64_t tag);
  // A timer that rings `delay_s` from now.
  void Wake(double delay_s, std::uint64_t tag);

  // Advances to the next instant anything happens and appends what did to
  // `events`, in no particular order; false when nothing is left.
  bool Next(std::vector<SimEvent>& events);

  double now() const { return now_; }
  // For the benchmark: flows started and rate solves done so far.
  std::uint64_t flows_started() const { return flows_started_; }
  std::uint64_t rate_solves() const { return rate_solves_; }

 private:
  struct Flow {
    FlowPath path;
    double remaining = 0;  // bytes, at time `since`
    double rate = 0;       // bytes/s
    double since = 0;
    std::uint64_t tag = 0;
    std::uint32_t version = 0;  // bumped on every change; stale ends are skipped
    bool live = false;          // on its links (entered, not yet finished)
  };
  struct Arrival {  // a flow's entry into the network
    double time;
    std::uint32_t flow;
  };
  // Flows started with one delay enter in the order they were started: a
  // queue per delay, not a heap (a run uses one or two: alpha, and none).
  struct DelayQueue {
    double delay;
    std::deque<Arrival> arrivals;
  };
  struct Timer {
    double time;
    std::uint64_t sequence;  // ties in the order they were set
    std::uint64_t tag;
    bool operator>(const Timer& other) const {
      return time != other.time ? time > other.time : sequence > other.sequence;
    }
  };
  struct End {  // when a flow ends at its current rate
    double time;
    std::uint32_t flow;
    std::uint32_t version;
    bool operator>(const End& other) const { return time > other.time; }
  };

  std::uint32_t NewFlow();
  void Enter(std::uint32_t flow);
  void Finish(std::uint32_t flow);
  void CollectComponent();
  void SolveRates();
  double NextFlowEnd();
  DelayQueue* EarliestArrival();

  double now_ = 0;
  std::vector<double> capacity_;                     // bytes/s per link
  std::vector<std::vector<std::uint32_t>> on_link_;  // flows on each link; finished ones
                                                     // are dropped at the next solve
  std::vector<Flow> flows_;                          // by id
  std::vector<std::uint32_t> free_flows_;
  std::vector<std::uint32_t> finished_;  // freed after the next solve has dropped them
  std::vector<DelayQueue> arrivals_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  std::priority_queue<End, std::vector<End>, std::greater<>> ends_;
  std::vector<std::int32_t> dirty_;  // links whose flows changed since the last solve
  std::uint64_t sequence_ = 0;
  std::uint64_t flows_started_ = 0;
  std::uint64_t rate_solves_ = 0;
  // Scratch of SolveRates: the flows and links whose rates may have changed
  // (those reachable from a dirty link through shared links), kept to spare
  // allocations. Marks are epochs, so nothing is cleared between solves.
  std::vector<std::uint32_t> link_mark_;
  std::vector<std::uint32_t> flow_mark_;
  std::uint32_t epoch_ = 0;
  std::vector<std::int32_t> component_links_;
  std::vector<std::uint32_t> component_flows_;
  std::vector<double> left_;
  std::vector<std::int32_t> unfrozen_on_;
  std::vector<std::uint8_t> saturated_;
  std::vector<std::uint32_t> unfrozen_;
  std::vector<double> new_rate_;
};

}  // namespace testbed
