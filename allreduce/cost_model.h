// The alpha-beta cost model of Thakur, Rabenseifner and Gropp, read off the
// schedules: a collective takes
//   sum over rounds of (alpha + beta * bytes on the busiest link in that round)
// where every rank has one full-duplex link: in a round, a rank's link carries
// max(bytes it sends, bytes it receives), and the round lasts as long as its
// busiest link needs. alpha is the per-round latency, beta the seconds per byte
// (8 / link rate in bit/s).
//
// The parameter server with S shards runs full duplex, in chunks: a shard's
// link carries N times its slice in (the pushes) and N times its slice out
// (the values) at the same time, the values of a chunk leaving as soon as every
// worker pushed it. So a step is two rounds: the first chunk of every push,
// which nothing overlaps (N chunks in), then the rest of the pushes overlapped
// with all the values (N times the slice, out, a chunk behind the pushes). The
// largest slice decides; a slice of one chunk is the two plain rounds, N
// slices in, then N out.
//
// fit: given measured times, least squares for alpha and beta (both >= 0)
// against the model's two terms, time = alpha * rounds + beta * bottleneck_bytes.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "allreduce/collective.h"

namespace testbed {

struct LinkModel {
  double alpha_s = 0;          // seconds per round
  double beta_s_per_byte = 0;  // seconds per byte on one link
};

struct CostEstimate {
  int rounds = 0;
  std::vector<std::int64_t> round_bottleneck_bytes;  // per round: the busiest link's bytes
  std::int64_t bottleneck_bytes = 0;                 // their sum
  double time_s = 0;
};

// alpha * rounds + beta * bottleneck_bytes.
double ModelTime(const LinkModel& link, int rounds, std::int64_t bottleneck_bytes);

// Per round, the busiest link's bytes: max over ranks of max(sent, received).
// `bytes` is each rank's vector size, a multiple of element_size.
std::vector<std::int64_t> RoundBottleneckBytes(const Collective& collective, int world_size,
                                               std::int64_t bytes, std::int64_t element_size,
                                               int root = 0);

CostEstimate EstimateCollective(const Collective& collective, int world_size,
                                std::int64_t bytes, std::int64_t element_size,
                                const LinkModel& link, int root = 0);

// A fabric's links, in bit/s, 0 for unlimited: each rank's host link and
// each rack's uplink to the spine (proto/fabric_spec.h fills it in).
struct LinkRates {
  std::vector<double> host_bps;    // per rank
  std::vector<double> uplink_bps;  // per rack of the placement; empty: no uplinks
};

// The same model on a fabric: a round lasts alpha plus its slowest link's
// time, over every host link (each direction: what its rank sends, what it
// receives) and every uplink (up: its rack's sends to other racks; down:
// what they receive from them). round_bottleneck_bytes then holds the bytes
// of each round's slowest link. Schedules only (ps has none).
CostEstimate EstimateOnFabric(const Collective& collective, int world_size, std::int64_t bytes,
                              std::int64_t element_size, double alpha_s,
                              const Placement& placement, const LinkRates& rates);

// Bytes of the largest of `servers` shards of a vector (the ring's balanced split).
std::int64_t LargestShardBytes(std::int64_t bytes, int servers, std::int64_t element_size);

// The chunk the parameter server pushes and serves in (PsClient::kChunkBytes and
// ParameterStore::kDefaultChunkBytes; a test holds them equal).
inline constexpr std::int64_t kParameterServerChunkBytes = 1 << 20;

// Two rounds through the largest shard's link: N first chunks in, then
// N*M/S in and out at once (the values a chunk behind), so
// bottleneck_bytes = N*M/S + N*min(chunk, M/S). Payload on the wire stays 2NM.
CostEstimate EstimateParameterServer(int workers, int servers, std::int64_t bytes,
                                     std::int64_t element_size, const LinkModel& link);

// Where the parameter server's shards sit on a fabric: on the spine, each
// behind its own link of `server_bps` (BytePS's dedicated servers), or shard s
// on worker s's host, sharing its link and rack (colocated; S <= N).
struct ServerSites {
  double server_bps = 0;
  bool colocated = false;
};

// The parameter server on a fabric: the same two rounds, each lasting alpha
// plus its slowest link - a host's (a worker's push out and values in, and a
// colocated shard's pushes in and values out), a dedicated shard's, or a
// rack's uplink (flows between racks; the spine is none). A colocated shard's
// own worker moves nothing on the wire. With every link at one rate B and
// k = N dedicated shards this is BytePS's max(M/B, N·M/(k·B)) per step, plus
// the first chunk's round; colocated, 2(N-1)/N·M/B, the ring's.
CostEstimate EstimateParameterServerOnFabric(int workers, int servers, std::int64_t bytes,
                                             std::int64_t element_size, double alpha_s,
                                             const Placement& placement, const LinkRates& rates,
                                             const ServerSites& sites);

// ps (S = servers) or an all-reduce collective by name.
absl::StatusOr<CostEstimate> EstimateAlgorithm(std::string_view algorithm, int workers,
                                               int servers, std::int64_t bytes,
                                               std::int64_t element_size, const LinkModel& link);

struct FitPoint {
  int rounds = 0;
  std::int64_t bottleneck_bytes = 0;
  double time_s = 0;
};

struct AlphaBetaFit {
  LinkModel link;
  double r_squared = 0;               // 1 - SS_res / SS_tot (1 when all times are equal and fit)
  double worst_relative_residual = 0;  // max |measured - model| / measured
  int points = 0;
};

// Least squares without intercept: time = alpha * rounds + beta * bottleneck_bytes,
// with alpha, beta >= 0 (a negative optimum is moved to the boundary).
// Fails when the two terms are not independent over the points (fewer than two
// distinct bottlenecks, for one algorithm at one N: fewer than two sizes).
absl::StatusOr<AlphaBetaFit> FitAlphaBeta(const std::vector<FitPoint>& points);

}  // namespace testbed
