#include "experiments/cli/trace_inputs.h"

#include "allreduce/chunking.h"
#include "allreduce/data_type.h"

namespace testbed {

std::vector<Bytes> TraceInputs(const Collective& collective, int workers, std::int64_t count,
                               int root, double (*start_value)(int workers, int rank)) {
  std::vector<Bytes> inputs(workers, Bytes(count * sizeof(double)));
  for (int r = 0; r < workers; ++r) {
    const Chunk mine = ChunkOf(count, workers, r);
    for (std::int64_t i = 0; i < count; ++i) {
      bool present = true;
      if (collective.semantics == Semantics::kBroadcast) present = r == root;
      if (collective.semantics == Semantics::kAllGather) {
        present = i >= mine.offset && i < mine.offset + mine.count;
      }
      StoreElement(DataType::kFloat64, inputs[r].data(), i,
                   present ? start_value(workers, r) : 0);
    }
  }
  return inputs;
}

}  // namespace testbed
