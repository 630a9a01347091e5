#include "experiments/results/row_timeline.h"

#include <algorithm>
#include <cstdint>
#include <span>

#include "absl/strings/str_cat.h"
#include "allreduce/collective.h"
#include "allreduce/data_type.h"
#include "common/byte_size.h"
#include "proto/fabric_spec.h"
#include "proto/spec.h"

namespace testbed {
namespace {

// One rank's rounds as spans: back to back from `start_us`, one per round
// with steps (a round without any takes no time in a measured run either).
std::vector<TimelineSpan> ScheduleSpans(const Schedule& schedule, std::int64_t element,
                                        double start_us,
                                        std::span<const std::uint64_t> ends) {
  std::vector<TimelineSpan> spans;
  const std::size_t rounds = std::min<std::size_t>(schedule.rounds.size(), ends.size());
  double at = start_us;
  for (std::size_t k = 0; k < rounds; ++k) {
    const double end = start_us + static_cast<double>(ends[k]);
    const Round& round = schedule.rounds[k];
    if (!round.steps.empty()) {
      TimelineSpan& span = spans.emplace_back();
      span.start_us = at;
      span.end_us = end;
      span.name = absl::StrCat("round ", k);
      for (const Step& step : round.steps) {
        if (step.IsReceive()) {
          span.bytes_received += step.count * element;
          continue;
        }
        if (span.peer < 0) span.peer = step.peer;
        ++span.sends;
        span.bytes_sent += step.count * element;
      }
    }
    at = end;
  }
  return spans;
}

// ps: until the last chunk was pushed, then the rest of the pulls.
std::vector<TimelineSpan> ParameterServerSpans(std::int64_t bytes, double start_us,
                                               std::span<const std::uint64_t> ends) {
  if (ends.size() != 2) return {};
  TimelineSpan push{start_us, start_us + static_cast<double>(ends[0]), "push"};
  push.bytes_sent = bytes;
  TimelineSpan pull{push.end_us, start_us + static_cast<double>(ends[1]), "pull"};
  pull.bytes_received = bytes;
  return {push, pull};
}

}  // namespace

TimelineRow TimelineOfRow(const proto::ExperimentSpec& spec, const proto::ResultRow& row) {
  TimelineRow timeline;
  const int n = static_cast<int>(row.workers());
  const bool simulated = row.transport() == "simulated";
  timeline.title = absl::StrCat(row.algorithm(), " ", FormatByteSize(row.bytes()), ", N = ", n,
                                simulated ? " (simulated)" : absl::StrCat(" (", row.transport(), ")"));
  const Collective* collective = FindCollective(row.algorithm());
  if (collective == nullptr || row.rank_round_counts_size() != n) return timeline;
  const auto element = static_cast<std::int64_t>(ElementSize(DataTypeOf(spec.dtype())));
  const Placement placement = PlacementOf(spec.fabric(), n);
  const std::span<const std::uint64_t> all_ends(row.rank_round_end_us().data(),
                                                row.rank_round_end_us().size());
  std::size_t at = 0;
  double last_end_us = -1;
  for (int r = 0; r < n; ++r) {
    const std::size_t count = row.rank_round_counts(r);
    if (at + count > all_ends.size()) break;  // a row that does not add up: no more tracks
    const std::span<const std::uint64_t> ends = all_ends.subspan(at, count);
    at += count;
    const double start_us = static_cast<double>(RankDelayMicros(spec.fabric(), r));
    timeline.ranks.push_back(
        collective->has_schedule()
            ? ScheduleSpans(collective->Build(r, n, row.bytes() / element, /*root=*/0, placement),
                            element, start_us, ends)
            : ParameterServerSpans(row.bytes(), start_us, ends));
    // The slowest is who took longest from its own start: a late rank waits
    // for nobody, the others wait for it.
    if (!ends.empty() && static_cast<double>(ends.back()) > last_end_us) {
      last_end_us = static_cast<double>(ends.back());
      timeline.slowest_rank = r;
    }
  }
  return timeline;
}

absl::Status WriteRowTimelines(const std::string& path, const proto::ExperimentSpec& spec,
                               const std::vector<proto::ResultRow>& rows, const std::string& about,
                               int* written) {
  std::vector<TimelineRow> timelines;
  for (const proto::ResultRow& row : rows) {
    if (row.rank_round_counts_size() > 0) timelines.push_back(TimelineOfRow(spec, row));
  }
  if (written != nullptr) *written = static_cast<int>(timelines.size());
  return WriteTimeline(path, timelines, about);
}

}  // namespace testbed
