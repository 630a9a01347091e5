// The binary combining tree shared by reduce and broadcast: ranks are
// renumbered relative to the root (v = rank - root mod N), and in level k
// (k = 0 .. ceil(log2 N)-1) every v with v mod 2^(k+1) == 2^k is paired with
// v - 2^k. Each level halves the number of partial results, pairwise - the
// reduction tree drawn in course notes - and the communication pattern is the
// binomial tree of MPICH: ceil(log2 N) rounds, one message per link per round.
#pragma once

#include <cstdint>

namespace testbed {

inline int TreeLevels(int world_size) {
  int levels = 0;
  while ((std::int64_t{1} << levels) < world_size) ++levels;
  return levels;
}

}  // namespace testbed
