// An invariant a fuzz target asserts: a violated one names itself on stderr and
// traps, a crash that libFuzzer saves (and the gcc replayer fails on), in any
// build type (not assert: NDEBUG would drop it).
#pragma once

#include <cstdio>

#define FUZZ_CHECK(condition)                                                      \
  do {                                                                             \
    if (!(condition)) {                                                            \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed\n", __FILE__, __LINE__,    \
                   #condition);                                                    \
      __builtin_trap();                                                            \
    }                                                                              \
  } while (0)
