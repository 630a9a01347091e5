// How a vector of `count` elements is cut into `parts` contiguous chunks of
// sizes that differ by at most one (the first count % parts chunks get the
// extra element). Every chunked collective uses this one rule, so traffic
// stays exact when count is not divisible by the number of ranks.
#pragma once

#include <cstdint>

namespace testbed {

struct Chunk {
  std::int64_t offset;
  std::int64_t count;
};

inline Chunk ChunkOf(std::int64_t count, int parts, int index) {
  const std::int64_t base = count / parts;
  const std::int64_t extra = count % parts;
  const std::int64_t offset = index * base + (index < extra ? index : extra);
  return Chunk{offset, base + (index < extra ? 1 : 0)};
}

// The index of the chunk that holds element `element` (the inverse of ChunkOf).
inline int ChunkOwner(std::int64_t count, int parts, std::int64_t element) {
  const std::int64_t base = count / parts;
  const std::int64_t extra = count % parts;
  const std::int64_t long_part = extra * (base + 1);  // elements in the longer chunks
  if (element < long_part) return static_cast<int>(element / (base + 1));
  return static_cast<int>(extra + (element - long_part) / base);
}

// Non-negative remainder, for ring arithmetic on rank indices.
inline int Mod(int value, int modulus) { return ((value % modulus) + modulus) % modulus; }

}  // namespace testbed
