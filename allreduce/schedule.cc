#include "allreduce/schedule.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

void AddStep(Round& round, StepKind kind, int peer, std::int64_t offset, std::int64_t count) {
  if (count > 0) round.steps.push_back(Step{kind, peer, offset, count});
}

bool Overlap(const Step& a, const Step& b) {
  return a.offset < b.offset + b.count && b.offset < a.offset + a.count;
}

}  // namespace

Round& Schedule::AddRound(std::string_view phase) {
  rounds.push_back(Round{phase, {}});
  return rounds.back();
}

void Schedule::Send(Round& round, int peer, std::int64_t offset, std::int64_t n) {
  AddStep(round, StepKind::kSend, peer, offset, n);
}

void Schedule::RecvReduce(Round& round, int peer, std::int64_t offset, std::int64_t n) {
  AddStep(round, StepKind::kRecvReduce, peer, offset, n);
}

void Schedule::RecvCopy(Round& round, int peer, std::int64_t offset, std::int64_t n) {
  AddStep(round, StepKind::kRecvCopy, peer, offset, n);
}

void Schedule::Append(const Schedule& next) {
  rounds.insert(rounds.end(), next.rounds.begin(), next.rounds.end());
}

std::int64_t Schedule::ElementsSent() const {
  std::int64_t total = 0;
  for (const Round& round : rounds)
    for (const Step& step : round.steps)
      if (step.kind == StepKind::kSend) total += step.count;
  return total;
}

std::int64_t Schedule::ElementsReceived() const {
  std::int64_t total = 0;
  for (const Round& round : rounds)
    for (const Step& step : round.steps)
      if (step.IsReceive()) total += step.count;
  return total;
}

absl::Status Validate(const Schedule& s) {
  if (s.world_size < 1 || s.rank < 0 || s.rank >= s.world_size || s.count < 0) {
    return absl::InvalidArgumentError(absl::StrCat("bad schedule header: rank ", s.rank,
                                                   " of ", s.world_size, ", count ", s.count));
  }
  // The executor validates before every run, so this allocates nothing unless
  // it has an error to report.
  for (std::size_t k = 0; k < s.rounds.size(); ++k) {
    const Round& round = s.rounds[k];
    const auto error = [&](auto&&... parts) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", s.rank, " round ", k, ": ", parts...));
    };
    for (std::size_t i = 0; i < round.steps.size(); ++i) {
      const Step& step = round.steps[i];
      if (step.peer < 0 || step.peer >= s.world_size || step.peer == s.rank) {
        return error("bad peer ", step.peer);
      }
      if (step.count <= 0 || step.offset < 0 || step.offset + step.count > s.count) {
        return error("range [", step.offset, ", ", step.offset + step.count,
                     ") outside buffer of ", s.count);
      }
      for (std::size_t j = 0; j < i; ++j) {
        const Step& earlier = round.steps[j];
        if (earlier.peer == step.peer && earlier.IsReceive() == step.IsReceive()) {
          return error("two ", step.IsReceive() ? "receives from" : "sends to", " peer ",
                       step.peer);
        }
      }
      if (step.kind != StepKind::kRecvCopy) continue;
      for (const Step& other : round.steps) {
        if (&other != &step && other.IsReceive() && Overlap(step, other)) {
          return error("copy-receive from ", step.peer, " overlaps the receive from ",
                       other.peer);
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateMatching(const std::vector<Schedule>& all_ranks) {
  const int n = static_cast<int>(all_ranks.size());
  // (round, from, to) -> element count, for sends and for receives.
  std::map<std::tuple<std::size_t, int, int>, std::int64_t> sends, recvs;
  for (int r = 0; r < n; ++r) {
    const Schedule& s = all_ranks[r];
    if (s.rank != r || s.world_size != n) {
      return absl::InvalidArgumentError(absl::StrCat("schedule ", r, " is for rank ", s.rank,
                                                     " of ", s.world_size));
    }
    if (absl::Status st = Validate(s); !st.ok()) return st;
    if (s.rounds.size() != all_ranks[0].rounds.size()) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", r, " has ", s.rounds.size(),
                                                     " rounds, rank 0 has ",
                                                     all_ranks[0].rounds.size()));
    }
    for (std::size_t k = 0; k < s.rounds.size(); ++k) {
      for (const Step& step : s.rounds[k].steps) {
        if (step.IsReceive()) {
          recvs[{k, step.peer, r}] = step.count;
        } else {
          sends[{k, r, step.peer}] = step.count;
        }
      }
    }
  }
  for (const auto& [key, count] : sends) {
    const auto& [k, from, to] = key;
    auto it = recvs.find(key);
    if (it == recvs.end() || it->second != count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "round ", k, ": rank ", from, " sends ", count, " elements to rank ", to,
          it == recvs.end() ? " which posts no receive"
                            : absl::StrCat(" which expects ", it->second)));
    }
  }
  if (recvs.size() != sends.size()) {
    for (const auto& [key, count] : recvs) {
      if (!sends.contains(key)) {
        const auto& [k, from, to] = key;
        return absl::InvalidArgumentError(absl::StrCat("round ", k, ": rank ", to,
                                                       " waits for ", count,
                                                       " elements that rank ", from,
                                                       " never sends"));
      }
    }
  }
  return absl::OkStatus();
}

std::string_view Name(StepKind kind) {
  switch (kind) {
    case StepKind::kSend: return "send";
    case StepKind::kRecvReduce: return "recv+reduce";
    case StepKind::kRecvCopy: return "recv+copy";
  }
  return "?";
}

bool LandsInPlace(const Step& recv, const Round& round) {
  if (recv.kind != StepKind::kRecvCopy) return false;
  return std::none_of(round.steps.begin(), round.steps.end(), [&](const Step& s) {
    return s.kind == StepKind::kSend && s.offset < recv.offset + recv.count &&
           recv.offset < s.offset + s.count;
  });
}

}  // namespace testbed
