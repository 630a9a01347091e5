#include "experiments/lab/lab_trace.h"

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

double BitOfRank(int /*workers*/, int rank) { return std::ldexp(1.0, rank); }

// [[mask, ...] per rank]: every element's value, which is its bitmask.
std::string BuffersJson(const std::vector<Bytes>& buffers, std::int64_t count) {
  std::vector<std::string> ranks;
  for (const Bytes& buffer : buffers) {
    std::vector<std::int64_t> masks;
    for (std::int64_t i = 0; i < count; ++i) {
      masks.push_back(std::llround(LoadElement(DataType::kFloat64, buffer.data(), i)));
    }
    ranks.push_back(absl::StrCat("[", absl::StrJoin(masks, ","), "]"));
  }
  return absl::StrCat("[", absl::StrJoin(ranks, ","), "]");
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

}  // namespace

absl::StatusOr<std::string> LabTraceJson(const std::string& name, int workers,
                                         std::int64_t count) {
  const Collective* c = FindCollective(name);
  if (c == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown collective '", name,
                                                   "' (choose from ",
                                                   CollectiveNames(Kinds::kScheduled), ")"));
  }
  if (!c->has_schedule()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " has no schedule to trace (choose from ", CollectiveNames(Kinds::kScheduled), ")"));
  }
  if (workers < 1 || workers > kLabMaxWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("n must be 1..", kLabMaxWorkers, ", not ", workers));
  }
  if (count < 1 || count > kLabMaxTraceCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("count must be 1..", kLabMaxTraceCount, ", not ", count));
  }
  const int root = 0;
  const std::vector<Bytes> inputs = TraceInputs(*c, workers, count, root, &BitOfRank);
  const InProcessRun run = RunInProcess(
      *c, inputs,
      {.type = DataType::kFloat64, .op = ReduceOp::kSum, .root = root, .keep_snapshots = true});
  for (int r = 0; r < workers; ++r) {
    if (!run.status[r].ok()) {
      return absl::InternalError(absl::StrCat("rank ", r, ": ", run.status[r].message()));
    }
  }
  std::vector<Schedule> schedules;
  for (int r = 0; r < workers; ++r) schedules.push_back(c->build(r, workers, count, root));

  std::vector<std::string> chunks;
  for (int i = 0; i < workers; ++i) {
    const Chunk chunk = ChunkOf(count, workers, i);
    chunks.push_back(absl::StrCat("[", chunk.offset, ",", chunk.offset + chunk.count, "]"));
  }
  std::vector<std::string> rounds;
  std::int64_t bytes_so_far = 0;
  for (std::size_t k = 0; k < schedules[0].rounds.size(); ++k) {
    std::vector<std::string> messages;
    for (int r = 0; r < workers; ++r) {
      for (const Step& send : schedules[r].rounds[k].steps) {
        if (send.kind != StepKind::kSend) continue;
        messages.push_back(absl::StrCat(
            "{\"from\":", r, ",\"to\":", send.peer, ",\"offset\":", send.offset,
            ",\"count\":", send.count, ",\"action\":\"",
            ReceiverAction(schedules, k, r, send), "\"}"));
        bytes_so_far += send.count * kElementBytes;
      }
    }
    rounds.push_back(absl::StrCat(
        "{\"phase\":", JsonString(schedules[0].rounds[k].phase), ",\"messages\":[",
        absl::StrJoin(messages, ","), "],\"buffers\":", BuffersJson(run.snapshots[k], count),
        ",\"bytes_so_far\":", bytes_so_far, "}"));
  }
  return absl::StrCat(
      "{\"collective\":", JsonString(c->name), ",\"semantics\":", JsonString(Name(c->semantics)),
      ",\"summary\":", JsonString(c->summary), ",\"workers\":", workers, ",\"count\":", count,
      ",\"element_bytes\":", kElementBytes, ",\"chunks\":[", absl::StrJoin(chunks, ","),
      "],\"formula\":", JsonString(c->formula),
      ",\"formula_bytes\":", c->formula_bytes(workers, count * kElementBytes),
      ",\"formula_rounds\":", c->formula_rounds(workers),
      ",\"initial\":", BuffersJson(inputs, count), ",\"rounds\":[", absl::StrJoin(rounds, ","),
      "]}");
}

}  // namespace testbed
