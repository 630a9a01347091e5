#include "experiments/lab/lab_memory.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "experiments/results/table.h"

namespace testbed {
std::vector<MeasuredZeroStage> ZeroTrafficOf(MeasuredCollective all_reduce,
                                             MeasuredCollective reduce_scatter,
                                             MeasuredCollective all_gather) {
  std::vector<MeasuredZeroStage> stages;
  for (const ZeroStage& s : ZeroMemory(/*parameters=*/1, /*gpus=*/1)) {
    const MeasuredCollective step{
        s.all_reduces * all_reduce.bytes + s.reduce_scatters * reduce_scatter.bytes +
            s.all_gathers * all_gather.bytes,
        s.all_reduces * all_reduce.time_us + s.reduce_scatters * reduce_scatter.time_us +
            s.all_gathers * all_gather.time_us};
    stages.push_back({s.stage, s.collectives, step.bytes, step.time_us,
                      all_reduce.bytes > 0 ? step.bytes / all_reduce.bytes : 0,
                      all_reduce.time_us > 0 ? step.time_us / all_reduce.time_us : 0,
                      s.traffic_vs_ddp});
  }
  return stages;
}

std::string MemoryJson(double parameters, int gpus, int stages, int micro_batches) {
  std::vector<std::string> zero;
  for (const ZeroStage& s : ZeroMemory(parameters, gpus)) {
    zero.push_back(absl::StrCat("{\"stage\":", s.stage, ",\"sharded\":", JsonString(s.sharded),
                                ",\"gb_per_gpu\":", s.bytes_per_gpu / 1e9,
                                ",\"traffic_vs_ddp\":", s.traffic_vs_ddp, "}"));
  }
  const PipelineBubble bubble = PipelineBubbleOf(stages, micro_batches);
  return absl::StrCat(
      "{\"params\":", parameters, ",\"gpus\":", gpus, ",\"bytes_per_param\":",
      kBytesPerParameter, ",\"zero\":[", absl::StrJoin(zero, ","),
      "],\"pipeline\":{\"stages\":", stages, ",\"micro_batches\":", micro_batches,
      ",\"bubble\":", bubble.bubble_fraction, ",\"gpipe_activations\":", bubble.gpipe_activations,
      ",\"one_f_one_b_activations\":", bubble.one_f_one_b_activations, "}}");
}

}  // namespace testbed
