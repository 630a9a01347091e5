// Known inputs and the results they must give, for every collective: the
// oracle of the unit tests and the correctness check (`wrong`) of every
// measured run. After Gloo's "rank r contributes r": integer-valued inputs, so
// sums are exact in float32 as well, and values that depend on the element
// index, so an element landing one slot off is wrong.
//
// Rank r contributes 1 + (r mod R) + s·(i mod P) at element i:
//   float32, float64, int32  R = N, s = 16, P = 97: r + 1 + 16(i mod 97).
//   float16  a half holds every integer up to 2048 and not every one beyond,
//            so s = 1, and R and P are the largest that keep the full sum
//            at most 2048 (every input is positive, so every partial sum a
//            schedule forms is at most the full sum, and exact too): R = N
//            and P = 97 up to N = 19; then P shrinks (N = 20: 92, N = 62: 2);
//            from N = 63 R shrinks instead, P staying 2 up to N = 819;
//            beyond, P = 1 (N = 1024: R = 3). Where P is 1, or R less than N,
//            the check is weaker - a misplaced element, or another rank's,
//            can hold the right value - but never inexact.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "allreduce/chunking.h"
#include "allreduce/collective.h"
#include "allreduce/data_type.h"
#include "allreduce/inprocess_run.h"

namespace testbed {

inline constexpr double kPoison = -7;  // fills ranges a collective must overwrite

// The R, s and P above.
struct InputPattern {
  std::int64_t rank_cycle = 1;  // R
  double step = 16;             // s
  std::int64_t period = 97;     // P
};

// Sum over ranks 0..N-1 of (r mod R).
inline double RankTermSum(const InputPattern& p, int world_size) {
  const std::int64_t r = p.rank_cycle, full = world_size / r, rest = world_size % r;
  return static_cast<double>(full * (r * (r - 1) / 2) + rest * (rest - 1) / 2);
}

inline InputPattern InputPatternFor(DataType type, int world_size) {
  if (type != DataType::kFloat16) return {.rank_cycle = std::max(world_size, 1)};
  constexpr double kExactIntegers = 2048;  // 2^11: a half's 11 significant bits
  InputPattern p{.rank_cycle = std::max(world_size, 1), .step = 1, .period = 2};
  const auto fits = [&] {
    return world_size + RankTermSum(p, world_size) +
               world_size * p.step * static_cast<double>(p.period - 1) <=
           kExactIntegers;
  };
  // An index term first (P = 2), then as many ranks apart as fit, then the
  // period as long as it fits.
  while (p.rank_cycle > 2 && !fits()) --p.rank_cycle;
  if (!fits()) p = {.rank_cycle = std::max(world_size, 1), .step = 1, .period = 1};
  while (p.rank_cycle > 1 && !fits()) --p.rank_cycle;
  while (p.period < 97) {
    ++p.period;
    if (!fits()) {
      --p.period;
      break;
    }
  }
  return p;
}

inline double InputValue(const InputPattern& p, int rank, std::int64_t index) {
  return 1 + static_cast<double>(rank % p.rank_cycle) +
         p.step * static_cast<double>(index % p.period);
}

inline double Reduced(const InputPattern& p, ReduceOp op, int world_size, std::int64_t index) {
  switch (op) {
    case ReduceOp::kSum:
      return world_size + RankTermSum(p, world_size) +
             world_size * p.step * static_cast<double>(index % p.period);
    case ReduceOp::kMin: return InputValue(p, 0, index);
    case ReduceOp::kMax:
      return InputValue(p, static_cast<int>(std::min<std::int64_t>(world_size, p.rank_cycle)) - 1,
                        index);
  }
  return 0;
}

// What rank `rank` holds before `semantics` runs, written into `buffer`.
// `phase` shifts the pattern along the elements: groups of a split
// (rank_groups.h) each fill with their own group index, so a value that
// leaked in from another group's rank of the same index fails the check.
inline void FillInput(Semantics semantics, int world_size, int rank, std::int64_t count,
                      DataType type, int root, std::byte* buffer, std::int64_t phase = 0) {
  const Chunk mine = ChunkOf(count, world_size, rank);
  const InputPattern pattern = InputPatternFor(type, world_size);
  for (std::int64_t i = 0; i < count; ++i) {
    double value = InputValue(pattern, rank, i + phase);
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

// Elements of rank r's `buffer` that differ from what `semantics` promises,
// for inputs filled with `phase` (FillInput).
inline Mismatches CheckRank(Semantics semantics, int world_size, int r, const std::byte* buffer,
                            std::int64_t count, DataType type, ReduceOp op, int root,
                            std::int64_t phase = 0) {
  Mismatches m;
  const InputPattern pattern = InputPatternFor(type, world_size);
  for (std::int64_t element = 0; element < count; ++element) {
    const std::int64_t i = element + phase;  // the pattern's index; chunks use `element`
    double expected = 0;
    switch (semantics) {
      case Semantics::kAllReduce: expected = Reduced(pattern, op, world_size, i); break;
      case Semantics::kBroadcast: expected = InputValue(pattern, root, i); break;
      case Semantics::kReduce:
        if (r != root) continue;
        expected = Reduced(pattern, op, world_size, i);
        break;
      case Semantics::kReduceScatter: {
        const Chunk mine = ChunkOf(count, world_size, r);
        if (element < mine.offset || element >= mine.offset + mine.count) continue;
        expected = Reduced(pattern, op, world_size, i);
        break;
      }
      case Semantics::kAllGather:
        expected = InputValue(pattern, ChunkOwner(count, world_size, element), i);
        break;
    }
    const double got = LoadElement(type, buffer, element);
    if (got != expected) {
      if (m.count == 0) {
        m.first = "rank " + std::to_string(r) + " element " + std::to_string(element) + ": got " +
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
