#include "experiments/results/timeline.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/limits.h"

namespace testbed {
namespace {

std::string Quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A metadata event naming a process (tid < 0) or one of its threads.
void AppendName(std::string& out, int pid, int tid, std::string_view name) {
  absl::StrAppend(&out, ",\n{\"ph\":\"M\",\"pid\":", pid);
  if (tid >= 0) absl::StrAppend(&out, ",\"tid\":", tid);
  absl::StrAppend(&out, ",\"name\":\"", tid >= 0 ? "thread_name" : "process_name",
                  "\",\"args\":{\"name\":", Quoted(name), "}}");
}

void AppendSpan(std::string& out, int pid, int tid, const TimelineSpan& span, bool slowest) {
  absl::StrAppendFormat(&out, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,",
                        pid, tid, span.start_us, span.end_us - span.start_us);
  absl::StrAppend(&out, "\"name\":", Quoted(span.name), ",\"args\":{");
  if (span.peer >= 0) absl::StrAppend(&out, "\"peer\":", span.peer, ",");
  absl::StrAppend(&out, "\"sends\":", span.sends, ",\"bytes_sent\":", span.bytes_sent,
                  ",\"bytes_received\":", span.bytes_received);
  if (slowest) absl::StrAppend(&out, ",\"slowest\":true");
  absl::StrAppend(&out, "}", slowest ? ",\"cname\":\"terrible\"" : "", "}");
}

}  // namespace

absl::Status CheckTimelineRanks(int ranks) {
  if (ranks <= kMaxTimelineRanks) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("a timeline records up to ", kMaxTimelineRanks,
                                                 " ranks (common/limits.h), not ", ranks));
}

std::string TimelineJson(const std::vector<TimelineRow>& rows, std::string_view about) {
  std::string out = absl::StrCat("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"about\":",
                                 Quoted(about), "},\n\"traceEvents\":[\n");
  // The first event has no comma before it: a metadata event that names nothing.
  absl::StrAppend(&out, "{\"ph\":\"M\",\"pid\":0,\"name\":\"process_name\",",
                  "\"args\":{\"name\":\"testbed\"}}");
  for (std::size_t row = 0; row < rows.size(); ++row) {
    const int pid = static_cast<int>(row) + 1;
    AppendName(out, pid, -1, rows[row].title);
    for (std::size_t rank = 0; rank < rows[row].ranks.size(); ++rank) {
      const bool slowest = static_cast<int>(rank) == rows[row].slowest_rank;
      const int tid = static_cast<int>(rank);
      AppendName(out, pid, tid,
                 rank < rows[row].track_names.size()
                     ? rows[row].track_names[rank]
                     : absl::StrCat("rank ", rank, slowest ? " (slowest)" : ""));
      for (const TimelineSpan& span : rows[row].ranks[rank]) {
        AppendSpan(out, pid, tid, span, slowest);
      }
    }
  }
  return out + "\n]}\n";
}

absl::Status WriteTimeline(const std::string& path, const std::vector<TimelineRow>& rows,
                           std::string_view about) {
  std::ofstream file(path, std::ios::trunc);
  if (!file) {
    return absl::UnavailableError(
        absl::StrCat("cannot write the timeline ", path, ": ", std::strerror(errno)));
  }
  file << TimelineJson(rows, about);
  file.close();
  if (!file) return absl::UnavailableError(absl::StrCat("cannot write the timeline ", path));
  return absl::OkStatus();
}

}  // namespace testbed
