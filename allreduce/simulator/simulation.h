// The simulator (docs/simulator.md): the very schedules the daemons run, or
// the parameter server's protocol, played on a fabric's links as flows that
// share them max-min fairly (allreduce/simulator/flow_simulator.h), instead of
// on a cluster. What it gives back is what the ranks of a run would report -
// each rank's time and payload - so a simulated row is made the way a
// measured one is.
//
// The model:
// - a message is one flow from its sender's host to its receiver's over the
//   links between them (allreduce/simulator/sim_fabric.h); it enters the
//   network alpha after both sides posted it (rendezvous: the sender's round
//   began and so did the receiver's), and arrives when its last byte does;
// - a received message costs its receiver `host_s_per_byte` per byte before
//   it counts (the reduce or copy), an optional host cost;
// - a rank's round ends when its sends went and its receives arrived, and its
//   next round begins at once (allreduce/schedule.h's round semantics);
// - the parameter server: each worker pushes its slice of every shard as one
//   stream of kParameterServerChunkBytes chunks, back to back, and pulls the
//   values as another; a shard sends chunk c's values once all N pushed it,
//   to every worker, each pull stream a chunk at a time. Streams pay alpha
//   once, when they start.
// - a slow rank (Fabric.slow_ranks) begins `start_delay_s` late, outside its
//   own time, as in a run.
// Ignored: congestion control and loss (flows get their fair share at once),
// TCP/IP headers, CPU contention beyond the host cost. Segmented
// (SimSetup::segment_bytes), messages are segments and a step waits on the
// segments it depends on, not on its whole round.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "allreduce/collective.h"
#include "allreduce/cost_model.h"
#include "allreduce/placement.h"
#include "allreduce/rank_groups.h"
#include "common/ethernet_frame.h"

namespace testbed {

// What of a TCP link's rate carries payload: at a 1500-byte MTU with TCP
// timestamps (Linux's default) a segment carries 1448 payload bytes in 1514
// on the wire, and tc's shapers charge every segment's Ethernet, IP and TCP
// headers (the emulated links, experiments/cluster/netns_fabric.cc), so
// payload moves 4.4% slower than the link rate.
inline constexpr double kTcpPayloadPerWireByte =
    static_cast<double>(kFramePayloadBytes) / kEthernetFrameBytes;

struct SimSetup {
  Placement placement;        // must pass ValidateRackPlacement
  LinkRates rates;            // host_bps: one per rank; 0 is unlimited
  ServerSites sites;          // the parameter server's shards
  double alpha_s = 0;         // per message (per stream, ps)
  double host_s_per_byte = 0;  // a receiver's cost per byte received
  std::vector<double> start_delay_s;  // per rank, or empty: every rank starts at 0
  bool record_spans = false;          // fill SimRank::spans, for a timeline
  // Cut every step into segments of at most this many bytes and play the
  // segment plan's dependencies as the executor runs them
  // (allreduce/simulator/segment_simulation.h); 0: whole steps, round by round.
  std::size_t segment_bytes = 0;
  // Groups that each run the collective among their own ranks at the same
  // time, sharing the fabric (allreduce/rank_groups.h); empty: every rank in one.
  RankGroups groups = {};
};

// A stretch of one rank's time on the timeline: a round of its schedule in
// which it sends or receives, or a phase of the parameter server's protocol.
// Times are the simulation's clock (a late rank's first span starts late);
// a rank's spans are back to back, so they add up to its time.
struct SimSpan {
  double start_s = 0;
  double end_s = 0;
  std::int32_t round = -1;  // the schedule's round; -1 for a ps phase
  const char* phase = "";   // ps: "push" (until its last chunk is pushed), "pull" (the rest)
  std::int32_t peer = -1;   // the round's first send goes to; -1 without sends
  std::int32_t sends = 0;
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
};

struct SimRank {
  double time_s = 0;  // from its own start to its end
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
  std::vector<std::int64_t> shard_bytes;  // ps: pushed to and pulled from each shard
  std::vector<SimSpan> spans;             // with SimSetup::record_spans
};

struct SimResult {
  std::vector<SimRank> ranks;
  // The simulator's own effort, for its benchmark.
  std::uint64_t flows = 0;
  std::uint64_t rate_solves = 0;
  std::uint64_t schedule_bytes = 0;  // what the ranks' schedules took in memory
};

// One collective with a schedule (collective.has_schedule()), every rank
// holding `bytes` (a multiple of element_size).
absl::StatusOr<SimResult> SimulateSchedule(const Collective& collective, int world_size,
                                           std::int64_t bytes, std::int64_t element_size,
                                           const SimSetup& setup, int root = 0);

// The parameter server with `servers` shards, split as the shards split
// (allreduce/chunking.h).
absl::StatusOr<SimResult> SimulateParameterServer(int workers, int servers, std::int64_t bytes,
                                                  std::int64_t element_size,
                                                  const SimSetup& setup);

}  // namespace testbed
