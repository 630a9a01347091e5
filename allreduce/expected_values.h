// Known inputs and the results they must give, for every collective: the
// oracle of the unit tests and the correctness check (`wrong`) of every
// measured run. After Gloo's "rank r contributes r": integer-valued inputs, so
// sums are exact in float32 as well, and values that depend on the element
// index, so an element landing one slot off is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allreduce/chunking.h"
#include "allreduce/collective.h"
#include "allreduce/data_type.h"
#include "allreduce/inprocess_run.h"

namespace testbed {

inline constexpr double kPoison = -7;  // fills ranges a collective must overwrite

inline double InputValue(int rank, std::int64_t index) {
  return rank + 1 + 16.0 * static_cast<double>(index % 97);
}

inline double Reduced(ReduceOp op, int world_size, std::int64_t index) {
  switch (op) {
    case ReduceOp::kSum:
      return world_size * (world_size + 1) / 2.0 + 16.0 * world_size * (index % 97);
    case ReduceOp::kMin: return InputValue(0, index);
    case ReduceOp::kMax: return InputValue(world_size - 1, index);
  }
  return 0;
}

// What rank `rank` holds before `semantics` runs, written into `buffer`.
inline void FillInput(Semantics semantics, int world_size, int rank, std::int64_t count,
                      DataType type, int root, std::byte* buffer) {
  const Chunk mine = ChunkOf(count, world_size, rank);
  for (std::int64_t i = 0; i < count; ++i) {
    double value = InputValue(rank, i);
    if (semantics == Semantics::kBroadcast && rank != root) value = kPoison;
    if (semantics == Semantics::kAllGather && (i < mine.offset || i >= mine.offset + mine.count)) {
      value = kPoison;
    }
    StoreElement(type, buffer, i, value);
  }
}

inline std::vector<Bytes> MakeInputs(Semantics semantics, int world_size, std::int64_t count,
                                     DataType type, int root) {
  std::vector<Bytes> inputs(world_size, Bytes(count * ElementSize(type)));
  for (int r = 0; r < world_size; ++r) {
    FillInput(semantics, world_size, r, count, type, root, inputs[r].data());
  }
  return inputs;
}

struct Mismatches {
  std::int64_t count = 0;
  std::string first;  // where the first one was, for the failure message
};

// Elements of rank r's `buffer` that differ from what `semantics` promises.
inline Mismatches CheckRank(Semantics semantics, int world_size, int r, const std::byte* buffer,
                            std::int64_t count, DataType type, ReduceOp op, int root) {
  Mismatches m;
  for (std::int64_t i = 0; i < count; ++i) {
    double expected = 0;
    switch (semantics) {
      case Semantics::kAllReduce: expected = Reduced(op, world_size, i); break;
      case Semantics::kBroadcast: expected = InputValue(root, i); break;
      case Semantics::kReduce:
        if (r != root) continue;
        expected = Reduced(op, world_size, i);
        break;
      case Semantics::kReduceScatter: {
        const Chunk mine = ChunkOf(count, world_size, r);
        if (i < mine.offset || i >= mine.offset + mine.count) continue;
        expected = Reduced(op, world_size, i);
        break;
      }
      case Semantics::kAllGather:
        expected = InputValue(ChunkOwner(count, world_size, i), i);
        break;
    }
    const double got = LoadElement(type, buffer, i);
    if (got != expected) {
      if (m.count == 0) {
        m.first = "rank " + std::to_string(r) + " element " + std::to_string(i) + ": got " +
                  std::to_string(got) + ", expected " + std::to_string(expected);
      }
      ++m.count;
    }
  }
  return m;
}

// Elements that differ from what `semantics` promises, over all ranks.
inline Mismatches CheckResults(Semantics semantics, const std::vector<Bytes>& buffers,
                               std::int64_t count, DataType type, ReduceOp op, int root) {
  const int world_size = static_cast<int>(buffers.size());
  Mismatches all;
  for (int r = 0; r < world_size; ++r) {
    const Mismatches m = CheckRank(semantics, world_size, r, buffers[r].data(), count, type, op, root);
    if (all.count == 0) all.first = m.first;
    all.count += m.count;
  }
  return all;
}

}  // namespace testbed
