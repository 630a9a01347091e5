#include "experiments/results/step_timeline.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/enum_text.h"

namespace testbed {
namespace {

constexpr int kComputeStream = -1;  // a track's stream: compute, or a communicator's index

// The span of `op` on `rank`, a member of `group`.
TimelineSpan OpSpan(const proto::WorkloadOp& op, const Collective* algorithm,
                    const proto::RankGroup& group, std::uint32_t rank, const OpTiming& timing) {
  TimelineSpan span;
  span.start_us = timing.start_s * 1e6;
  span.end_us = timing.end_s * 1e6;
  span.name = EnumText(op.kind());
  if (!op.label().empty()) absl::StrAppend(&span.name, ": ", op.label());
  if (op.kind() == proto::WorkloadOp::compute) return span;
  span.bytes_sent = static_cast<std::int64_t>(SentInOp(op, *algorithm, group, rank));
  if (op.kind() == proto::WorkloadOp::send_recv) {
    const bool sender = group.ranks(0) == rank;
    span.peer = static_cast<std::int32_t>(group.ranks(sender ? 1 : 0));
    span.sends = sender ? 1 : 0;
    span.bytes_received = sender ? 0 : static_cast<std::int64_t>(op.bytes());
  } else {
    span.bytes_received = span.bytes_sent;  // every rank of a group receives what it sends
  }
  return span;
}

}  // namespace

TimelineRow StepTimeline(const proto::WorkloadTrace& trace, const TraceAlgorithms& algorithms,
                         const StepSimulation& step, std::string title) {
  // Tracks in order of rank, its compute first, then its communicators'.
  std::map<std::pair<std::uint32_t, int>, std::vector<TimelineSpan>> tracks;
  for (int i = 0; i < trace.ops_size(); ++i) {
    const proto::WorkloadOp& op = trace.ops(i);
    const bool compute = op.kind() == proto::WorkloadOp::compute;
    const int stream = compute ? kComputeStream : static_cast<int>(op.communicator());
    const Collective* algorithm = AlgorithmOf(algorithms, op.kind());
    const proto::Communicator& c = trace.communicators(static_cast<int>(op.communicator()));
    for (const proto::RankGroup& group : c.groups()) {
      for (std::uint32_t rank : group.ranks()) {
        tracks[{rank, stream}].push_back(OpSpan(op, algorithm, group, rank, step.ops[i]));
      }
    }
  }
  TimelineRow row;
  row.title = std::move(title);
  for (auto& [key, spans] : tracks) {
    const auto& [rank, stream] = key;
    const bool critical = static_cast<int>(rank) == step.critical_rank;
    row.track_names.push_back(absl::StrCat(
        "rank ", rank, " ",
        stream == kComputeStream ? std::string("compute") : trace.communicators(stream).name(),
        critical ? " (critical)" : ""));
    row.ranks.push_back(std::move(spans));
  }
  return row;
}

}  // namespace testbed
