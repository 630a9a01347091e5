#include "allreduce/collective.h"

#include "allreduce/collectives.h"
#include "allreduce/tree_shape.h"

namespace testbed {
namespace {

int Log2Floor(int n) {
  int log = 0;
  while ((2 << log) <= n) ++log;
  return log;
}

std::int64_t NaiveBytes(int n, std::int64_t m) { return std::int64_t{n} * (n - 1) * m; }
std::int64_t TwiceLinearBytes(int n, std::int64_t m) { return 2 * std::int64_t{n - 1} * m; }
std::int64_t LinearBytes(int n, std::int64_t m) { return std::int64_t{n - 1} * m; }
std::int64_t ButterflyBytes(int n, std::int64_t m) {
  const int log_p = Log2Floor(n);
  const std::int64_t p = std::int64_t{1} << log_p;
  return p * log_p * m + 2 * (n - p) * m;
}

int NaiveRounds(int n) { return n > 1 ? 1 : 0; }
int RingRounds(int n) { return 2 * (n - 1); }
int LinearRounds(int n) { return n - 1; }
int TreeRounds(int n) { return 2 * TreeLevels(n); }
int HalfTreeRounds(int n) { return TreeLevels(n); }
int ButterflyRounds(int n) { return Log2Floor(n) + ((n & (n - 1)) != 0 ? 2 : 0); }
int HalvingDoublingRounds(int n) { return 2 * Log2Floor(n) + ((n & (n - 1)) != 0 ? 2 : 0); }

// Adapters to the registry's one builder signature.
template <Schedule (*F)(int, int, std::int64_t)>
Schedule Rootless(int rank, int n, std::int64_t count, int /*root*/) {
  return F(rank, n, count);
}

}  // namespace

const std::vector<Collective>& AllCollectives() {
  static const std::vector<Collective> kCollectives = {
      {"naive", Semantics::kAllReduce,
       "every rank sends its whole vector to every other rank, one round", "N(N-1)M",
       Rootless<BuildAllReduceNaive>, NaiveBytes, NaiveRounds},
      {"ring", Semantics::kAllReduce,
       "ring reduce-scatter then ring all-gather, chunks of M/N", "2(N-1)M",
       Rootless<BuildAllReduceRing>, TwiceLinearBytes, RingRounds},
      {"tree", Semantics::kAllReduce,
       "binary-tree reduce to rank 0, then broadcast back down", "2(N-1)M",
       Rootless<BuildAllReduceTree>, TwiceLinearBytes, TreeRounds},
      {"butterfly", Semantics::kAllReduce,
       "recursive doubling: swap the whole vector with the rank one bit away",
       "p M log2 p + 2rM, p=2^floor(log2 N), r=N-p (N M log2 N when r=0)",
       Rootless<BuildAllReduceButterfly>, ButterflyBytes, ButterflyRounds},
      {"halving-doubling", Semantics::kAllReduce,
       "Rabenseifner: recursive-halving reduce-scatter, recursive-doubling all-gather",
       "2(N-1)M, exact for any M (fold r=N-p into p=2^floor(log2 N): 2(p-1)M + 2rM)",
       Rootless<BuildAllReduceHalvingDoubling>, TwiceLinearBytes, HalvingDoublingRounds},
      {"reduce-scatter", Semantics::kReduceScatter,
       "ring reduce-scatter: rank r ends with the reduced chunk r", "(N-1)M",
       Rootless<BuildReduceScatterRing>, LinearBytes, LinearRounds},
      {"all-gather", Semantics::kAllGather,
       "ring all-gather: every rank ends with every rank's chunk", "(N-1)M",
       Rootless<BuildAllGatherRing>, LinearBytes, LinearRounds},
      {"broadcast", Semantics::kBroadcast,
       "binary-tree broadcast of the root's vector", "(N-1)M", BuildBroadcastTree, LinearBytes,
       HalfTreeRounds},
      {"reduce", Semantics::kReduce, "binary-tree reduce to the root", "(N-1)M", BuildReduceTree,
       LinearBytes, HalfTreeRounds},
  };
  return kCollectives;
}

std::vector<const Collective*> AllReduceAlgorithms() {
  std::vector<const Collective*> out;
  for (const Collective& c : AllCollectives()) {
    if (c.is_all_reduce()) out.push_back(&c);
  }
  return out;
}

const Collective* FindCollective(std::string_view name) {
  for (const Collective& c : AllCollectives()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string CollectiveNames(bool all_reduce_only) {
  std::string names;
  for (const Collective& c : AllCollectives()) {
    if (all_reduce_only && !c.is_all_reduce()) continue;
    if (!names.empty()) names += ", ";
    names += c.name;
  }
  return names;
}

std::string_view Name(Semantics semantics) {
  switch (semantics) {
    case Semantics::kAllReduce: return "all-reduce";
    case Semantics::kReduceScatter: return "reduce-scatter";
    case Semantics::kAllGather: return "all-gather";
    case Semantics::kBroadcast: return "broadcast";
    case Semantics::kReduce: return "reduce";
  }
  return "?";
}

}  // namespace testbed
