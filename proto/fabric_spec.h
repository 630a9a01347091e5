// The fabric spec (proto/fabric.proto) read once: checked against the workers
// of an experiment, and turned into what the core and the emulated cluster
// take - the placement of ranks in racks (allreduce/placement.h) and every
// link's rate.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "allreduce/cost_model.h"
#include "allreduce/placement.h"
#include "proto/fabric.pb.h"

namespace testbed {

// Refuses, naming the field and its value: more racks than workers (a rack
// would be empty), hosts for fewer than `workers`, an oversubscription <= 0,
// a host link for a worker outside 0..workers-1 or at rate 0, a rack count
// past kMaxSimulatedWorkers.
absl::Status ValidateFabric(const proto::Fabric& fabric, int workers);

// The rack of each of `workers` ranks (the flat switch when racks <= 1).
// `fabric` must pass ValidateFabric.
Placement PlacementOf(const proto::Fabric& fabric, int workers);

// Every link's rate in bit/s, 0 for unlimited: each rank's host link (the
// experiment's `host_link_bps` unless a host link overrides it) and each
// rack's uplink (none on the flat switch).
LinkRates LinkRatesOf(const proto::Fabric& fabric, int workers, double host_link_bps);

// Where the shards sit, for the cost model: `link_bps` is a dedicated
// shard's link (the experiment's link rate).
ServerSites ServerSitesOf(const proto::Fabric& fabric, double link_bps);

// How long a packet may wait in a shaped link's queue (link_queue_us, or the
// 20 ms default).
std::uint64_t LinkQueueMicros(const proto::Fabric& fabric);

// How long rank `rank` waits before each iteration (slow_ranks); 0 for most.
std::uint64_t RankDelayMicros(const proto::Fabric& fabric, int rank);
// The longest of them: what every collective waits for.
std::uint64_t LongestRankDelayMicros(const proto::Fabric& fabric);

// "2 racks x 4, 4:1 uplinks, packed", for tables and logs; "flat" for one switch.
std::string FabricSummary(const proto::Fabric& fabric);

}  // namespace testbed
