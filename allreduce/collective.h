// The registry of everything the harness runs, after nccl-tests: each entry
// names the collective, how it runs (a schedule over a Transport, or the
// parameter server's client), what the result means, its closed-form traffic
// and round count (docs/design.md), the bottleneck the course names for it and its
// bus-bandwidth factor. Every list of algorithms - the CLI's flags and
// defaults, `model`, the course table, the harness, the tests - reads this one
// table; adding an algorithm is one schedule builder and one entry here.
//
// The parameter server is an entry too: it computes an all-reduce (every
// worker ends with the sum), it just has no schedule - its bytes go worker ->
// server -> worker instead of rank to rank.
//
// Thread-safety: immutable after static initialization.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "allreduce/placement.h"
#include "allreduce/schedule.h"

namespace testbed {

enum class Semantics {
  kAllReduce,      // every rank: reduction of all vectors
  kReduceScatter,  // rank r: reduction of chunk r
  kAllGather,      // every rank: chunk c from rank c, for every c
  kBroadcast,      // every rank: the root's vector
  kReduce,         // root: reduction of all vectors
};

// How an entry runs.
enum class Runner {
  kSchedule,         // its schedule, through the executor over a Transport
  kParameterServer,  // push to and pull from the parameter-server shards (gRPC)
};

struct Collective {
  std::string_view name;     // "ring", "reduce-scatter", "ps", ...
  Semantics semantics;
  Runner runner;
  std::string_view summary;     // one line, for --help and traces
  std::string_view formula;     // total payload bytes, as docs/design.md writes it
  std::string_view bottleneck;  // which link decides the time, for the course table
  // nullptr for the parameter server. `placement` (the rack of each rank) is
  // read by the schedules that depend on it: hierarchical only.
  Schedule (*builder)(int rank, int world_size, std::int64_t count, int root,
                      const Placement& placement);
  // Closed forms: total payload bytes for `bytes` per rank, and rounds of
  // `count` elements on `placement` (only hierarchical's depend on them:
  // formula_rounds below).
  std::int64_t (*formula_bytes)(int world_size, std::int64_t bytes);
  int (*rounds_of)(int world_size, std::int64_t count, const Placement& placement);
  // nccl-tests' bus-bandwidth factor: busbw = algbw * factor, so that every
  // collective's busbw compares with the link's rate (2(N-1)/N for
  // all-reduce, (N-1)/N for reduce-scatter and all-gather, 1 for broadcast
  // and reduce). 0 at N = 1, where no byte crosses a link.
  double (*busbw_factor)(int world_size);
  // Whether it only differs from another entry where ranks sit in racks
  // (hierarchical is the ring on one switch): a comparison lists it by default
  // only on a fabric with racks.
  bool needs_racks = false;

  // One rank's schedule; the flat switch unless a placement is given.
  Schedule Build(int rank, int world_size, std::int64_t count, int root = 0,
                 const Placement& placement = Placement::Flat()) const {
    return builder(rank, world_size, count, root, placement);
  }
  // The rounds of its schedule, on the flat switch unless a placement is given.
  int formula_rounds(int world_size, std::int64_t count = 1,
                     const Placement& placement = Placement::Flat()) const {
    return rounds_of(world_size, count, placement);
  }
  bool is_all_reduce() const { return semantics == Semantics::kAllReduce; }
  bool has_root() const {
    return semantics == Semantics::kBroadcast || semantics == Semantics::kReduce;
  }
  bool has_schedule() const { return runner == Runner::kSchedule; }
  bool runs_on_parameter_server() const { return runner == Runner::kParameterServer; }
};

// Which entries a list takes.
enum class Kinds {
  kAll,              // everything the harness runs (local, run, model)
  kAllReduce,        // all-reduce semantics, ps included
  kDefaultAllReduce,  // the default comparison on one switch: kAllReduce less needs_racks
  kScheduled,        // the ones with a schedule (trace, traffic, cost model per round)
  kScheduledAllReduce,
};

// Every entry, in the order tables list them.
const std::vector<Collective>& AllCollectives();
std::vector<const Collective*> CollectivesOf(Kinds kinds);
// nullptr when unknown.
const Collective* FindCollective(std::string_view name);
// Whether `name` is the registry's parameter-server entry: the one question
// "is this ps?", answered by the registry rather than by the name's spelling.
bool RunsOnParameterServer(std::string_view name);
// nullptr unless `name` is known and of `kinds`.
const Collective* FindCollective(std::string_view name, Kinds kinds);
// "ps, naive, ring, ..." for error messages and --help.
std::string CollectiveNames(Kinds kinds);

std::string_view Name(Semantics semantics);

}  // namespace testbed
