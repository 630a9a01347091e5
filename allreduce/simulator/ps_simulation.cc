// SimulateParameterServer (allreduce/simulator/simulation.h): the protocol of
// server/parameter_store.h and worker/ps_client.h as flows - per worker and
// shard one push stream and one pull stream of kParameterServerChunkBytes
// chunks, a shard's chunk c leaving for every worker once all N pushed it.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/chunking.h"
#include "allreduce/simulator/flow_simulator.h"
#include "allreduce/simulator/sim_fabric.h"
#include "allreduce/simulator/simulation.h"

namespace testbed {
namespace {

// Tags: what a flow or timer is, and for whom. Worker and shard take 24 bits each.
enum class Tag : std::uint64_t { kPush = 0, kPull = 1, kPushApplied = 2, kPullApplied = 3, kStart = 4 };
std::uint64_t Tagged(Tag kind, int worker, int shard) {
  return (static_cast<std::uint64_t>(kind) << 56) | (static_cast<std::uint64_t>(worker) << 24) |
         static_cast<std::uint64_t>(shard);
}
Tag KindOf(std::uint64_t tag) { return static_cast<Tag>(tag >> 56); }
int WorkerOf(std::uint64_t tag) { return static_cast<int>((tag >> 24) & 0xffffff); }
int ShardOf(std::uint64_t tag) { return static_cast<int>(tag & 0xffffff); }

class ParameterServerRun {
 public:
  ParameterServerRun(int workers, int servers, std::int64_t bytes, std::int64_t element_size,
                     const SimSetup& setup)
      : n_(workers),
        s_(servers),
        setup_(setup),
        fabric_(sim_, workers, setup.placement, setup.rates, servers, setup.sites) {
    for (int s = 0; s < servers; ++s) {
      slice_bytes_.push_back(ChunkOf(bytes / element_size, servers, s).count * element_size);
      chunks_.push_back(static_cast<int>((slice_bytes_.back() + kParameterServerChunkBytes - 1) /
                                         kParameterServerChunkBytes));
      pushed_.emplace_back(static_cast<std::size_t>(chunks_.back()), 0);
    }
    const auto streams = static_cast<std::size_t>(workers) * static_cast<std::size_t>(servers);
    push_next_.assign(streams, 0);
    push_applied_.assign(streams, 0);
    pull_next_.assign(streams, 0);
    pull_busy_.assign(streams, false);
    ready_.assign(static_cast<std::size_t>(servers), 0);
    chunks_left_.assign(static_cast<std::size_t>(workers), 0);
    for (int c : chunks_) {
      for (int& left : chunks_left_) left += c;
    }
    end_s_.assign(static_cast<std::size_t>(workers), -1);
    pushes_left_ = chunks_left_;
    pushed_s_.assign(static_cast<std::size_t>(workers), 0);
  }

  absl::StatusOr<std::vector<double>> Run() {
    for (int w = 0; w < n_; ++w) {
      if (const double delay = StartDelay(w); delay > 0) {
        sim_.Wake(delay, Tagged(Tag::kStart, w, 0));
      } else {
        Start(w);
      }
    }
    std::vector<SimEvent> events;
    while (sim_.Next(events)) {
      for (const SimEvent& event : events) Handle(event.tag);
      events.clear();
    }
    std::vector<double> times;
    for (int w = 0; w < n_; ++w) {
      if (end_s_[static_cast<std::size_t>(w)] < 0) {
        return absl::InternalError(absl::StrCat("worker ", w, " never got all its values"));
      }
      times.push_back(end_s_[static_cast<std::size_t>(w)] - StartDelay(w));
    }
    return times;
  }

  const FlowSimulator& sim() const { return sim_; }

  // A worker's two phases, back to back: until its last chunk is pushed
  // (pulls of chunks already reduced overlap it), then the rest of the pulls.
  std::vector<SimSpan> Spans(int worker, std::int64_t bytes) const {
    const auto w = static_cast<std::size_t>(worker);
    SimSpan push;
    push.start_s = StartDelay(worker);
    push.end_s = std::max(push.start_s, pushed_s_[w]);
    push.phase = "push";
    push.sends = TotalChunks();
    push.bytes_sent = bytes;
    SimSpan pull;
    pull.start_s = push.end_s;
    pull.end_s = end_s_[w];
    pull.phase = "pull";
    pull.bytes_received = bytes;
    return {push, pull};
  }

 private:
  int TotalChunks() const {
    int total = 0;
    for (int c : chunks_) total += c;
    return total;
  }
  std::size_t Stream(int worker, int shard) const {
    return static_cast<std::size_t>(worker) * static_cast<std::size_t>(s_) +
           static_cast<std::size_t>(shard);
  }
  double StartDelay(int worker) const {
    const auto w = static_cast<std::size_t>(worker);
    return w < setup_.start_delay_s.size() ? setup_.start_delay_s[w] : 0;
  }
  double ChunkBytes(int shard, int chunk) const {
    return static_cast<double>(std::min<std::int64_t>(
        kParameterServerChunkBytes,
        slice_bytes_[static_cast<std::size_t>(shard)] - chunk * kParameterServerChunkBytes));
  }
  double ReceiveCost(double bytes) const { return bytes * setup_.host_s_per_byte; }

  void Start(int worker) {
    for (int s = 0; s < s_; ++s) PushNext(worker, s, setup_.alpha_s);
    if (chunks_left_[static_cast<std::size_t>(worker)] == 0) {
      end_s_[static_cast<std::size_t>(worker)] = sim_.now();
    }
  }
  void PushNext(int worker, int shard, double delay) {
    const int chunk = push_next_[Stream(worker, shard)];
    if (chunk >= chunks_[static_cast<std::size_t>(shard)]) return;
    sim_.StartFlow(fabric_.WorkerToShard(worker, shard), ChunkBytes(shard, chunk), delay,
                   Tagged(Tag::kPush, worker, shard));
  }
  // The pull stream of (worker, shard) sends its next chunk if it is idle and
  // the chunk is ready; the stream's first chunk pays alpha.
  void PullNext(int worker, int shard) {
    const std::size_t stream = Stream(worker, shard);
    const int chunk = pull_next_[stream];
    if (pull_busy_[stream] || chunk >= ready_[static_cast<std::size_t>(shard)]) return;
    pull_busy_[stream] = true;
    sim_.StartFlow(fabric_.ShardToWorker(shard, worker), ChunkBytes(shard, chunk),
                   chunk == 0 ? setup_.alpha_s : 0, Tagged(Tag::kPull, worker, shard));
  }
  // A pushed chunk reduced into its shard: the last worker's makes it ready.
  void PushApplied(int worker, int shard) {
    const int chunk = push_applied_[Stream(worker, shard)]++;
    if (++pushed_[static_cast<std::size_t>(shard)][static_cast<std::size_t>(chunk)] < n_) return;
    // Every worker pushes its chunks in order, so chunks become ready in order.
    ready_[static_cast<std::size_t>(shard)] = chunk + 1;
    for (int w = 0; w < n_; ++w) PullNext(w, shard);
  }
  void ValueArrived(int worker) {
    if (--chunks_left_[static_cast<std::size_t>(worker)] == 0) {
      end_s_[static_cast<std::size_t>(worker)] = sim_.now();
    }
  }

  void Handle(std::uint64_t tag) {
    const int worker = WorkerOf(tag);
    const int shard = ShardOf(tag);
    const std::size_t stream = Stream(worker, shard);
    switch (KindOf(tag)) {
      case Tag::kStart: Start(worker); return;
      case Tag::kPush: {
        // The stream goes on while the shard reduces what arrived.
        const int chunk = push_next_[stream]++;
        if (--pushes_left_[static_cast<std::size_t>(worker)] == 0) {
          pushed_s_[static_cast<std::size_t>(worker)] = sim_.now();
        }
        PushNext(worker, shard, 0);
        if (setup_.host_s_per_byte > 0) {
          sim_.Wake(ReceiveCost(ChunkBytes(shard, chunk)), Tagged(Tag::kPushApplied, worker, shard));
          return;
        }
        PushApplied(worker, shard);
        return;
      }
      case Tag::kPushApplied: PushApplied(worker, shard); return;
      case Tag::kPull: {
        const int chunk = pull_next_[stream]++;
        pull_busy_[stream] = false;
        // The stream goes on while the worker copies what arrived.
        PullNext(worker, shard);
        if (setup_.host_s_per_byte > 0) {
          sim_.Wake(ReceiveCost(ChunkBytes(shard, chunk)), Tagged(Tag::kPullApplied, worker, shard));
          return;
        }
        ValueArrived(worker);
        return;
      }
      case Tag::kPullApplied: ValueArrived(worker); return;
    }
  }

  int n_;
  int s_;
  const SimSetup& setup_;
  FlowSimulator sim_;
  SimFabric fabric_;
  std::vector<std::int64_t> slice_bytes_;  // per shard
  std::vector<int> chunks_;                // per shard
  std::vector<std::vector<int>> pushed_;   // per shard, per chunk: workers whose push arrived
  std::vector<int> ready_;                 // per shard: chunks every worker pushed
  std::vector<int> push_next_;             // per stream: the chunk on the wire or next
  std::vector<int> push_applied_;          // per stream: chunks reduced into the shard
  std::vector<int> pull_next_;
  std::vector<bool> pull_busy_;
  std::vector<int> chunks_left_;           // per worker: values still to arrive
  std::vector<double> end_s_;              // per worker; -1 until done
  std::vector<int> pushes_left_;           // per worker: chunks still to push
  std::vector<double> pushed_s_;           // per worker: when its last push arrived
};

}  // namespace

absl::StatusOr<SimResult> SimulateParameterServer(int workers, int servers, std::int64_t bytes,
                                                  std::int64_t element_size,
                                                  const SimSetup& setup) {
  if (workers < 1 || servers < 1 || workers >= (1 << 24) || servers >= (1 << 24) ||
      element_size < 1 || bytes < 0 || bytes % element_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot simulate ps: ", workers, " workers, ",
                                                   servers, " shards, ", bytes, " bytes"));
  }
  if (setup.sites.colocated && servers > workers) {
    return absl::InvalidArgumentError(
        absl::StrCat(servers, " colocated shards need as many workers, not ", workers));
  }
  if (static_cast<int>(setup.rates.host_bps.size()) != workers) {
    return absl::InvalidArgumentError(absl::StrCat(setup.rates.host_bps.size(),
                                                   " host links for ", workers, " workers"));
  }
  if (absl::Status st = ValidateRackPlacement(setup.placement, workers); !st.ok()) return st;
  ParameterServerRun run(workers, servers, bytes, element_size, setup);
  absl::StatusOr<std::vector<double>> times = run.Run();
  if (!times.ok()) return times.status();
  SimResult result;
  for (int w = 0; w < workers; ++w) {
    SimRank rank;
    rank.time_s = (*times)[static_cast<std::size_t>(w)];
    if (setup.record_spans) rank.spans = run.Spans(w, bytes);
    rank.bytes_sent = bytes;
    rank.bytes_received = bytes;
    for (int s = 0; s < servers; ++s) {
      rank.shard_bytes.push_back(2 * ChunkOf(bytes / element_size, servers, s).count * element_size);
    }
    result.ranks.push_back(std::move(rank));
  }
  result.flows = run.sim().flows_started();
  result.rate_solves = run.sim().rate_solves();
  return result;
}

}  // namespace testbed
