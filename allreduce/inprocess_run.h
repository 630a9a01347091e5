// Runs one collective on N threads over an InProcessFabric: the Executor and
// the schedules exactly as the daemons run them, with memory instead of a
// network. Used by the unit tests and by `testbed trace`.
//
// Thread-safety: RunInProcess is reentrant; it owns its threads and joins them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "allreduce/collective.h"
#include "allreduce/data_type.h"
#include "allreduce/memory.h"
#include "allreduce/rank_groups.h"
#include "allreduce/transport/transport.h"

namespace testbed {

using Bytes = std::vector<std::byte>;

struct InProcessRun {
  std::vector<Bytes> buffers;                    // per rank, after the collective
  std::vector<std::vector<PeerTraffic>> traffic;  // [rank][peer], measured by the transport
  std::vector<std::vector<Bytes>> snapshots;     // [round][rank], when requested
  std::vector<absl::Status> status;              // per rank
};

struct InProcessRunOptions {
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  bool keep_snapshots = false;  // copy every rank's buffer after every round
  // Where each rank's vector lives while the collective runs: inputs are
  // uploaded into it first, results downloaded from it after.
  MemoryType memory = MemoryType::kHost;
  // The executor's segment size (Executor::RunOptions); 0 runs round by round.
  std::size_t segment_bytes = 0;
  // The rack of each rank, for the schedules that read it (hierarchical).
  Placement placement = Placement::Flat();
  // Groups that each run the collective among their own ranks, all at once
  // (allreduce/rank_groups.h); empty: one group of every rank.
  RankGroups groups = {};
};

// `inputs` holds one buffer per rank (the world size), all the same size.
InProcessRun RunInProcess(const Collective& collective, std::vector<Bytes> inputs,
                          const InProcessRunOptions& options);

}  // namespace testbed
