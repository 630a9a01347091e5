// A fabric (allreduce/placement.h, allreduce/cost_model.h's LinkRates and
// ServerSites) as links of a FlowSimulator, and the path a message takes
// over them: its host's link up; between racks, its rack's uplink up and the
// other rack's uplink down (the spine itself is no bottleneck); the other
// host's link down. Each direction of a full-duplex link is a link of its
// own. A link at rate 0 (unlimited) is left out of every path.
//
// Thread-safety: a plain value.
#pragma once

#include <vector>

#include "allreduce/cost_model.h"
#include "allreduce/placement.h"
#include "allreduce/simulator/flow_simulator.h"

namespace testbed {

class SimFabric {
 public:
  // Adds the links of `workers` hosts, their racks' uplinks and - unless
  // colocated - `servers` dedicated shard machines on the spine to `sim`.
  // `rates.host_bps` has one rate per worker; the placement must be valid.
  SimFabric(FlowSimulator& sim, int workers, const Placement& placement, const LinkRates& rates,
            int servers = 0, const ServerSites& sites = {});

  FlowPath HostToHost(int from, int to) const;
  // Worker to shard and back: a dedicated shard on the spine, or shard s on
  // worker s's host (colocated), where its own worker's bytes cross nothing.
  FlowPath WorkerToShard(int worker, int shard) const;
  FlowPath ShardToWorker(int shard, int worker) const;

 private:
  struct Duplex {
    int up = -1;  // -1: unlimited
    int down = -1;
  };
  static Duplex AddDuplex(FlowSimulator& sim, double bits_per_s);
  static void AddIf(FlowPath& path, int link) {
    if (link >= 0) path.Add(link);
  }
  int RackOf(int worker) const { return rack_of_[static_cast<std::size_t>(worker)]; }

  std::vector<Duplex> hosts_;
  std::vector<Duplex> uplinks_;  // per rack; empty on one switch
  std::vector<Duplex> shards_;   // dedicated shard machines; empty when colocated
  std::vector<int> rack_of_;
  bool colocated_ = false;
};

}  // namespace testbed
