// The registry of collectives, after nccl-tests: each entry names a schedule
// builder, what the result means, and the closed-form traffic and round count
// that DESIGN.md states for it. Everything that lists algorithms - the CLI,
// the tests, the harness - reads this one table.
//
// Thread-safety: immutable after static initialization.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "allreduce/schedule.h"

namespace testbed {

enum class Semantics {
  kAllReduce,      // every rank: reduction of all vectors
  kReduceScatter,  // rank r: reduction of chunk r
  kAllGather,      // every rank: chunk c from rank c, for every c
  kBroadcast,      // every rank: the root's vector
  kReduce,         // root: reduction of all vectors
};

struct Collective {
  std::string_view name;     // "ring", "reduce-scatter", ...
  Semantics semantics;
  std::string_view summary;  // one line, for --help and traces
  std::string_view formula;  // total payload bytes, as DESIGN.md writes it
  Schedule (*build)(int rank, int world_size, std::int64_t count, int root);
  // Closed forms: total payload bytes for `bytes` per rank, and rounds.
  std::int64_t (*formula_bytes)(int world_size, std::int64_t bytes);
  int (*formula_rounds)(int world_size);

  bool is_all_reduce() const { return semantics == Semantics::kAllReduce; }
  bool has_root() const {
    return semantics == Semantics::kBroadcast || semantics == Semantics::kReduce;
  }
};

// The parameter server's name among the algorithms (specs, rows, the cost
// model). It is no collective - it has no schedule - so it is not in the table.
inline constexpr std::string_view kParameterServer = "ps";

const std::vector<Collective>& AllCollectives();
// The all-reduce algorithms, in registry order (the order tables list them).
std::vector<const Collective*> AllReduceAlgorithms();
// nullptr when unknown.
const Collective* FindCollective(std::string_view name);
// "naive, ring, ..." for error messages and --help.
std::string CollectiveNames(bool all_reduce_only);

std::string_view Name(Semantics semantics);

}  // namespace testbed
