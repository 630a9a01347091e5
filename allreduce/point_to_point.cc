#include "allreduce/point_to_point.h"

#include <algorithm>

namespace testbed {

Schedule BuildSendRecv(int rank, int world_size, std::int64_t count, int to, int from) {
  Schedule schedule;
  schedule.rank = rank;
  schedule.world_size = world_size;
  schedule.count = count;
  // A rank with nothing to do still has the round, empty: every rank's
  // schedule has the same rounds, as ValidateMatching and the simulator expect.
  Round& round = schedule.AddRound("send-recv");
  if (to >= 0) schedule.Send(round, to, 0, count);
  if (from >= 0) schedule.RecvCopy(round, from, 0, count);
  return schedule;
}

Schedule BuildPipelineShift(int rank, int world_size, std::int64_t count,
                            const std::vector<int>& stages) {
  const auto at = std::find(stages.begin(), stages.end(), rank);
  if (at == stages.end()) return BuildSendRecv(rank, world_size, count, -1, -1);
  const auto stage = static_cast<std::size_t>(at - stages.begin());
  const int to = stage + 1 < stages.size() ? stages[stage + 1] : -1;
  const int from = stage > 0 ? stages[stage - 1] : -1;
  return BuildSendRecv(rank, world_size, count, to, from);
}

}  // namespace testbed
