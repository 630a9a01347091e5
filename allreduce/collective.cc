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

std::int64_t ParameterServerBytes(int n, std::int64_t m) { return 2 * std::int64_t{n} * m; }

int NaiveRounds(int n) { return n > 1 ? 1 : 0; }
int RingRounds(int n) { return 2 * (n - 1); }
int LinearRounds(int n) { return n - 1; }
int TreeRounds(int n) { return 2 * TreeLevels(n); }
int HalfTreeRounds(int n) { return TreeLevels(n); }
int ButterflyRounds(int n) { return Log2Floor(n) + ((n & (n - 1)) != 0 ? 2 : 0); }
int HalvingDoublingRounds(int n) { return 2 * Log2Floor(n) + ((n & (n - 1)) != 0 ? 2 : 0); }
int PushThenPullRounds(int) { return 2; }

double AllReduceBusFactor(int n) { return n > 1 ? 2.0 * (n - 1) / n : 0; }
double ScatterGatherBusFactor(int n) { return n > 1 ? 1.0 * (n - 1) / n : 0; }
double RootedBusFactor(int n) { return n > 1 ? 1 : 0; }

// Adapters to the registry's one signature for rounds, and for builders.
template <int (*F)(int)>
int FlatRounds(int n, std::int64_t /*count*/, const Placement&) {
  return F(n);
}

template <Schedule (*F)(int, int, std::int64_t)>
Schedule Rootless(int rank, int n, std::int64_t count, int /*root*/, const Placement&) {
  return F(rank, n, count);
}
template <Schedule (*F)(int, int, std::int64_t, int)>
Schedule Rooted(int rank, int n, std::int64_t count, int root, const Placement&) {
  return F(rank, n, count, root);
}
template <Schedule (*F)(int, int, std::int64_t, const Placement&)>
Schedule Placed(int rank, int n, std::int64_t count, int /*root*/, const Placement& placement) {
  return F(rank, n, count, placement);
}

bool IsOf(const Collective& c, Kinds kinds) {
  switch (kinds) {
    case Kinds::kAll: return true;
    case Kinds::kAllReduce: return c.is_all_reduce();
    case Kinds::kDefaultAllReduce: return c.is_all_reduce() && !c.needs_racks;
    case Kinds::kScheduled: return c.has_schedule();
    case Kinds::kScheduledAllReduce: return c.has_schedule() && c.is_all_reduce();
  }
  return false;
}

}  // namespace

const std::vector<Collective>& AllCollectives() {
  using enum Semantics;
  using enum Runner;
  static const std::vector<Collective> kCollectives = {
      {"ps", kAllReduce, kParameterServer,
       "every worker pushes its vector to the server shards and pulls the sum back",
       "2NM (2NM/S through each of S shards)",
       "the server's link: N first chunks in, then N·M/S in and out at once",
       nullptr, ParameterServerBytes, FlatRounds<PushThenPullRounds>, AllReduceBusFactor},
      {"naive", kAllReduce, kSchedule,
       "every rank sends its whole vector to every other rank, one round", "N(N-1)M",
       "every link: (N−1)·M out and (N−1)·M in", Rootless<BuildAllReduceNaive>, NaiveBytes,
       FlatRounds<NaiveRounds>, AllReduceBusFactor},
      {"ring", kAllReduce, kSchedule, "ring reduce-scatter then ring all-gather, chunks of M/N",
       "2(N-1)M", "every link: 2(N−1)/N·M each way", Rootless<BuildAllReduceRing>,
       TwiceLinearBytes, FlatRounds<RingRounds>, AllReduceBusFactor},
      {"tree", kAllReduce, kSchedule, "binary-tree reduce to rank 0, then broadcast back down",
       "2(N-1)M", "an inner node's link: M per round, 2⌈log2 N⌉ rounds",
       Rootless<BuildAllReduceTree>, TwiceLinearBytes, FlatRounds<TreeRounds>, AllReduceBusFactor},
      {"butterfly", kAllReduce, kSchedule,
       "recursive doubling: swap the whole vector with the rank one bit away",
       "p M log2 p + 2rM, p=2^floor(log2 N), r=N-p (N M log2 N when r=0)",
       "every link: M per round, log2 N rounds (+2 if N≠2^k)", Rootless<BuildAllReduceButterfly>,
       ButterflyBytes, FlatRounds<ButterflyRounds>, AllReduceBusFactor},
      {"halving-doubling", kAllReduce, kSchedule,
       "Rabenseifner: recursive-halving reduce-scatter, recursive-doubling all-gather",
       "2(N-1)M, exact for any M (fold r=N-p into p=2^floor(log2 N): 2(p-1)M + 2rM)",
       "every link: M/2^k in round k of each half, 2·log2 N rounds (+2 if N≠2^k)",
       Rootless<BuildAllReduceHalvingDoubling>, TwiceLinearBytes,
       FlatRounds<HalvingDoublingRounds>, AllReduceBusFactor},
      {"hierarchical", kAllReduce, kSchedule,
       "ring reduce-scatter inside each rack, ring all-reduce of each shard across racks, "
       "all-gather inside the rack",
       "2(N-1)M, 2(R-1)M of it across R racks",
       "a rack's uplink: 2(R−1)/R·M each way (a rack-order ring's hop: 2(N−1)/N·M)",
       Placed<BuildAllReduceHierarchical>, TwiceLinearBytes, HierarchicalRounds, AllReduceBusFactor,
       /*needs_racks=*/true},
      {"reduce-scatter", kReduceScatter, kSchedule,
       "ring reduce-scatter: rank r ends with the reduced chunk r", "(N-1)M",
       "every link: (N−1)/N·M each way", Rootless<BuildReduceScatterRing>, LinearBytes,
       FlatRounds<LinearRounds>, ScatterGatherBusFactor},
      {"all-gather", kAllGather, kSchedule,
       "ring all-gather: every rank ends with every rank's chunk", "(N-1)M",
       "every link: (N−1)/N·M each way", Rootless<BuildAllGatherRing>, LinearBytes,
       FlatRounds<LinearRounds>, ScatterGatherBusFactor},
      {"broadcast", kBroadcast, kSchedule, "binary-tree broadcast of the root's vector", "(N-1)M",
       "the root's link: M out per round, ⌈log2 N⌉ rounds", Rooted<BuildBroadcastTree>, LinearBytes,
       FlatRounds<HalfTreeRounds>, RootedBusFactor},
      {"reduce", kReduce, kSchedule, "binary-tree reduce to the root", "(N-1)M",
       "the root's link: M in per round, ⌈log2 N⌉ rounds", Rooted<BuildReduceTree>, LinearBytes,
       FlatRounds<HalfTreeRounds>, RootedBusFactor},
  };
  return kCollectives;
}

std::vector<const Collective*> CollectivesOf(Kinds kinds) {
  std::vector<const Collective*> out;
  for (const Collective& c : AllCollectives()) {
    if (IsOf(c, kinds)) out.push_back(&c);
  }
  return out;
}

const Collective* FindCollective(std::string_view name) {
  for (const Collective& c : AllCollectives()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

bool RunsOnParameterServer(std::string_view name) {
  const Collective* c = FindCollective(name);
  return c != nullptr && c->runs_on_parameter_server();
}

const Collective* FindCollective(std::string_view name, Kinds kinds) {
  const Collective* c = FindCollective(name);
  return c != nullptr && IsOf(*c, kinds) ? c : nullptr;
}

std::string CollectiveNames(Kinds kinds) {
  std::string names;
  for (const Collective* c : CollectivesOf(kinds)) {
    if (!names.empty()) names += ", ";
    names += c->name;
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
