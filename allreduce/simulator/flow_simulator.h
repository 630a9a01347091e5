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
    double remaining;  // bytes
    double rate = 0;   // bytes/s, from the last solve
    std::uint64_t tag;
  };
  struct Pending {  // a flow's entry or a timer, by time
    double time;
    std::uint64_t sequence;  // ties in the order they were made
    bool is_flow;
    std::uint32_t index;     // into waiting_ (flows) or unused (timers)
    std::uint64_t tag;
    bool operator>(const Pending& other) const {
      return time != other.time ? time > other.time : sequence > other.sequence;
    }
  };

  void SolveRates();
  double NextFlowEnd() const;
  void MoveFlowsTo(double time, std::vector<SimEvent>& events);

  double now_ = 0;
  std::vector<double> capacity_;  // bytes/s per link
  std::vector<Flow> flows_;       // in flight
  bool rates_stale_ = false;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending_;
  std::vector<Flow> waiting_;     // flows not yet entered, by Pending::index
  std::vector<std::uint32_t> free_waiting_;
  std::uint64_t sequence_ = 0;
  std::uint64_t flows_started_ = 0;
  std::uint64_t rate_solves_ = 0;
  // Scratch of SolveRates, kept to spare allocations.
  std::vector<double> left_;
  std::vector<std::int32_t> unfrozen_on_;
  std::vector<std::uint8_t> saturated_;
  std::vector<std::int32_t> touched_;  // links some flow in flight crosses
  std::vector<std::uint32_t> unfrozen_;
};

}  // namespace testbed
