// Timelines (docs/simulator.md, "Timelines"): a run's ranks over time as
// Chrome trace-event JSON, which Perfetto (ui.perfetto.dev) and
// chrome://tracing open. Each row of the run is a process, each rank a track
// (thread) in it, each span a complete event ("ph": "X") whose arguments hold
// the peer and the bytes; the slowest rank's track is named so, and its spans
// carry "slowest": true. Times are microseconds from the row's start.
//
// Thread-safety: free functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace testbed {

struct TimelineSpan {
  double start_us = 0;
  double end_us = 0;
  std::string name;  // "round 3", "push"
  std::int32_t peer = -1;  // -1: no send in the span (left out of the arguments)
  std::int32_t sends = 0;
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
};

struct TimelineRow {
  std::string title;  // the process's name: "ring 16MiB, N = 8 (simulated)"
  std::vector<std::vector<TimelineSpan>> ranks;  // per track (a rank), its spans in order
  int slowest_rank = -1;
  // Each track's name where a rank has several (a replayed step's compute and
  // each of its communicators' streams); empty: "rank i".
  std::vector<std::string> track_names;
};

// OK where a timeline of `ranks` ranks can be drawn: at most
// kMaxTimelineRanks (common/limits.h), which keeps the file one Perfetto opens.
absl::Status CheckTimelineRanks(int ranks);

// The whole trace as one JSON object; `about` goes into its metadata.
std::string TimelineJson(const std::vector<TimelineRow>& rows, std::string_view about);

// TimelineJson written to `path` (replaced); the error names the path.
absl::Status WriteTimeline(const std::string& path, const std::vector<TimelineRow>& rows,
                           std::string_view about);

}  // namespace testbed
