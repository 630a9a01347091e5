#include "experiments/lab/lab_trace.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allreduce/chunking.h"
#include "allreduce/collective.h"
#include "allreduce/data_type.h"
#include "allreduce/inprocess_run.h"
#include "experiments/cli/trace_inputs.h"
#include "experiments/results/table.h"

namespace testbed {
namespace {

constexpr std::int64_t kElementBytes = sizeof(double);

// [node][element]: the bitmask of the ranks whose contributions it holds.
using Masks = std::vector<std::vector<std::int64_t>>;

double BitOfRank(int /*workers*/, int rank) { return std::ldexp(1.0, rank); }

// [[mask, ...] per node].
std::string MasksJson(const Masks& masks) {
  std::vector<std::string> nodes;
  for (const std::vector<std::int64_t>& node : masks) {
    nodes.push_back(absl::StrCat("[", absl::StrJoin(node, ","), "]"));
  }
  return absl::StrCat("[", absl::StrJoin(nodes, ","), "]");
}

// Every element's value, which is its bitmask.
Masks MasksOf(const std::vector<Bytes>& buffers, std::int64_t count) {
  Masks masks;
  for (const Bytes& buffer : buffers) {
    std::vector<std::int64_t>& node = masks.emplace_back();
    for (std::int64_t i = 0; i < count; ++i) {
      node.push_back(std::llround(LoadElement(DataType::kFloat64, buffer.data(), i)));
    }
  }
  return masks;
}

std::string MessageJson(int from, int to, Chunk range, const char* action) {
  return absl::StrCat("{\"from\":", from, ",\"to\":", to, ",\"offset\":", range.offset,
                      ",\"count\":", range.count, ",\"action\":\"", action, "\"}");
}

std::string RoundJson(std::string_view phase, const std::vector<std::string>& messages,
                      const Masks& buffers, std::int64_t bytes_so_far) {
  return absl::StrCat("{\"phase\":", JsonString(phase), ",\"messages\":[",
                      absl::StrJoin(messages, ","), "],\"buffers\":", MasksJson(buffers),
                      ",\"bytes_so_far\":", bytes_so_far, "}");
}

// What a trace says besides its rounds. Nodes 0..workers-1 are the ranks;
// the parameter server's shards follow them as nodes workers..workers+servers-1.
struct TraceBody {
  int servers = 0;
  std::vector<Chunk> server_slices{};  // shard s keeps these elements
  std::string_view source;             // "executor" or "protocol"
  std::string note{};                  // for the page, when the trace is not a run's
  Masks initial{};
  std::vector<std::string> rounds{};
};

std::string RangesJson(const std::vector<Chunk>& ranges) {
  std::vector<std::string> json;
  for (const Chunk& r : ranges) {
    json.push_back(absl::StrCat("[", r.offset, ",", r.offset + r.count, "]"));
  }
  return absl::StrCat("[", absl::StrJoin(json, ","), "]");
}

std::string TraceJson(const Collective& c, int workers, std::int64_t count,
                      const TraceBody& body) {
  std::vector<Chunk> chunks;
  for (int i = 0; i < workers; ++i) chunks.push_back(ChunkOf(count, workers, i));
  return absl::StrCat(
      "{\"collective\":", JsonString(c.name), ",\"semantics\":", JsonString(Name(c.semantics)),
      ",\"summary\":", JsonString(c.summary), ",\"source\":", JsonString(body.source),
      ",\"note\":", JsonString(body.note), ",\"workers\":", workers,
      ",\"servers\":", body.servers, ",\"server_slices\":", RangesJson(body.server_slices),
      ",\"count\":", count, ",\"element_bytes\":", kElementBytes,
      ",\"chunks\":", RangesJson(chunks), ",\"formula\":", JsonString(c.formula),
      ",\"formula_bytes\":", c.formula_bytes(workers, count * kElementBytes),
      ",\"formula_rounds\":", c.formula_rounds(workers), ",\"initial\":", MasksJson(body.initial),
      ",\"rounds\":[", absl::StrJoin(body.rounds, ","), "]}");
}

// What the receiver of `send` (from rank `from`) does with it in round k.
const char* ReceiverAction(const std::vector<Schedule>& schedules, std::size_t k, int from,
                           const Step& send) {
  for (const Step& recv : schedules[send.peer].rounds[k].steps) {
    if (recv.IsReceive() && recv.peer == from) {
      return recv.kind == StepKind::kRecvReduce ? "reduce" : "copy";
    }
  }
  return "copy";
}

// A scheduled collective: its schedules run by the in-process executor, every
// round's buffers the executor's own snapshots.
absl::StatusOr<std::string> ExecutorTraceJson(const Collective& c, int workers,
                                              std::int64_t count) {
  const int root = 0;
  const std::vector<Bytes> inputs = TraceInputs(c, workers, count, root, &BitOfRank);
  const InProcessRun run = RunInProcess(
      c, inputs,
      {.type = DataType::kFloat64, .op = ReduceOp::kSum, .root = root, .keep_snapshots = true});
  for (int r = 0; r < workers; ++r) {
    if (!run.status[r].ok()) {
      return absl::InternalError(absl::StrCat("rank ", r, ": ", run.status[r].message()));
    }
  }
  std::vector<Schedule> schedules;
  for (int r = 0; r < workers; ++r) schedules.push_back(c.Build(r, workers, count, root));

  TraceBody body{.source = "executor", .initial = MasksOf(inputs, count)};
  std::int64_t bytes_so_far = 0;
  for (std::size_t k = 0; k < schedules[0].rounds.size(); ++k) {
    std::vector<std::string> messages;
    for (int r = 0; r < workers; ++r) {
      for (const Step& send : schedules[r].rounds[k].steps) {
        if (send.kind != StepKind::kSend) continue;
        messages.push_back(MessageJson(r, send.peer, {send.offset, send.count},
                                       ReceiverAction(schedules, k, r, send)));
        bytes_so_far += send.count * kElementBytes;
      }
    }
    body.rounds.push_back(RoundJson(schedules[0].rounds[k].phase, messages,
                                    MasksOf(run.snapshots[k], count), bytes_so_far));
  }
  return TraceJson(c, workers, count, body);
}

void Fill(std::vector<std::int64_t>& node, Chunk range, std::int64_t mask) {
  std::fill_n(node.begin() + range.offset, range.count, mask);
}

// The parameter server has no schedule: it runs through gRPC (worker/ and
// server/), never through the executor. So this trace is built from its
// protocol, not recorded from a run: with S shards, shard s keeps the slice
// ChunkOf(count, S, s) (as server/parameter_store.cc does); round 1 every
// worker pushes each shard its slice and the shard adds it in, so the shard's
// slice holds all N; round 2 every shard sends that sum back to every worker.
// A shard's row is 0 (holds nothing) outside its slice. An empty slice (S >
// count) sends nothing. The bytes come to the registry's 2NM exactly.
std::string ParameterServerTraceJson(const Collective& c, int workers, int servers,
                                     std::int64_t count) {
  TraceBody body{.servers = servers,
                 .source = "protocol",
                 .note = "The parameter server runs through gRPC, not the executor: this trace "
                         "is built from its protocol (push each slice to its shard, pull the "
                         "sums back), not recorded from a run."};
  Masks masks(workers + servers, std::vector<std::int64_t>(count, 0));
  for (int w = 0; w < workers; ++w) Fill(masks[w], {0, count}, std::int64_t{1} << w);
  body.initial = masks;
  const std::int64_t every_rank = (std::int64_t{1} << workers) - 1;
  std::vector<std::string> push;
  std::vector<std::string> pull;
  std::int64_t pushed_bytes = 0;
  for (int s = 0; s < servers; ++s) {
    const Chunk slice = ChunkOf(count, servers, s);
    body.server_slices.push_back(slice);
    if (slice.count == 0) continue;
    for (int w = 0; w < workers; ++w) {
      push.push_back(MessageJson(w, workers + s, slice, "reduce"));
      pull.push_back(MessageJson(workers + s, w, slice, "copy"));
      pushed_bytes += slice.count * kElementBytes;
    }
    Fill(masks[workers + s], slice, every_rank);
  }
  body.rounds.push_back(RoundJson("push", push, masks, pushed_bytes));
  for (int w = 0; w < workers; ++w) Fill(masks[w], {0, count}, every_rank);
  body.rounds.push_back(RoundJson("pull", pull, masks, 2 * pushed_bytes));
  return TraceJson(c, workers, count, body);
}

}  // namespace

absl::StatusOr<std::string> LabTraceJson(const std::string& name, int workers,
                                         std::int64_t count, int servers) {
  const Collective* c = FindCollective(name);
  if (c == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown collective '", name, "' (choose from ", CollectiveNames(Kinds::kAll), ")"));
  }
  if (workers < 1 || workers > kLabMaxWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("n must be 1..", kLabMaxWorkers, ", not ", workers));
  }
  if (count < 1 || count > kLabMaxTraceCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("count must be 1..", kLabMaxTraceCount, ", not ", count));
  }
  if (c->runs_on_parameter_server()) {
    if (servers < 1 || servers > workers) {
      return absl::InvalidArgumentError(
          absl::StrCat("servers must be 1..", workers, " (n), not ", servers));
    }
    return ParameterServerTraceJson(*c, workers, servers, count);
  }
  return ExecutorTraceJson(*c, workers, count);
}

}  // namespace testbed
