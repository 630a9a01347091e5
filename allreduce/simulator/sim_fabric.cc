#include "allreduce/simulator/sim_fabric.h"

namespace testbed {

SimFabric::Duplex SimFabric::AddDuplex(FlowSimulator& sim, double bits_per_s) {
  if (bits_per_s <= 0) return {};
  return {sim.AddLink(bits_per_s / 8), sim.AddLink(bits_per_s / 8)};
}

SimFabric::SimFabric(FlowSimulator& sim, int workers, const Placement& placement,
                     const LinkRates& rates, int servers, const ServerSites& sites)
    : colocated_(sites.colocated) {
  for (int w = 0; w < workers; ++w) {
    hosts_.push_back(AddDuplex(sim, rates.host_bps[static_cast<std::size_t>(w)]));
    rack_of_.push_back(placement.RackOf(w));
  }
  if (const int racks = placement.Racks(workers); racks > 1) {
    for (std::size_t r = 0; r < static_cast<std::size_t>(racks); ++r) {
      uplinks_.push_back(AddDuplex(sim, r < rates.uplink_bps.size() ? rates.uplink_bps[r] : 0));
    }
  }
  if (!colocated_) {
    for (int s = 0; s < servers; ++s) shards_.push_back(AddDuplex(sim, sites.server_bps));
  }
}

FlowPath SimFabric::HostToHost(int from, int to) const {
  FlowPath path;
  if (from == to) return path;
  AddIf(path, hosts_[static_cast<std::size_t>(from)].up);
  const int from_rack = RackOf(from);
  const int to_rack = RackOf(to);
  if (from_rack != to_rack && !uplinks_.empty()) {
    AddIf(path, uplinks_[static_cast<std::size_t>(from_rack)].up);
    AddIf(path, uplinks_[static_cast<std::size_t>(to_rack)].down);
  }
  AddIf(path, hosts_[static_cast<std::size_t>(to)].down);
  return path;
}

FlowPath SimFabric::WorkerToShard(int worker, int shard) const {
  if (colocated_) return HostToHost(worker, shard);
  FlowPath path;
  AddIf(path, hosts_[static_cast<std::size_t>(worker)].up);
  if (!uplinks_.empty()) AddIf(path, uplinks_[static_cast<std::size_t>(RackOf(worker))].up);
  AddIf(path, shards_[static_cast<std::size_t>(shard)].down);
  return path;
}

FlowPath SimFabric::ShardToWorker(int shard, int worker) const {
  if (colocated_) return HostToHost(shard, worker);
  FlowPath path;
  AddIf(path, shards_[static_cast<std::size_t>(shard)].up);
  if (!uplinks_.empty()) AddIf(path, uplinks_[static_cast<std::size_t>(RackOf(worker))].down);
  AddIf(path, hosts_[static_cast<std::size_t>(worker)].down);
  return path;
}

}  // namespace testbed
