// Makes glibc's malloc keep large freed blocks for reuse in this process.
//
// The daemons move tensors in blocks of a megabyte and more (gRPC slices, the
// parameter server's staged and served chunks), allocated and freed every
// step. By default glibc serves such blocks with mmap, or trims them off its
// heaps when freed, so each step page-faults its memory back in (zeroed and
// charged to the cgroup page by page); with fixed thresholds the blocks are
// kept and reused (the figures are in the commit that made it). The cost: a
// daemon keeps up to the trim threshold of freed memory.
//
// Call once, first thing in main(), before any thread starts.
//
// Between experiments a worker gives the freed memory back
// (ReturnFreedMemory): each experiment's UCX worker grows pools of tens of
// megabytes in the heap, and the pages later allocations touch in the holes
// they leave would otherwise add up, a few KiB per experiment, to the heap's
// high-water mark (a daemon serving 1000 experiments grew by megabytes).
#pragma once

#include <malloc.h>

namespace testbed {

inline void KeepFreedMemoryForReuse() {
  // Blocks below this come from the heaps (and are reused), not from mmap.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  // Free memory at a heap's top up to this much stays mapped.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // One arena, the main heap, which only the trim threshold shrinks. A
  // thread's own arena lives in 64 MiB heaps that glibc unmaps whenever one
  // falls empty, whatever the thresholds: gRPC's read buffers landed in such
  // heaps and were page-faulted in again every step. With two cores, one
  // arena's lock costs nothing measurable.
  mallopt(M_ARENA_MAX, 1);
}

// Hands every free page of the heap back to the system (glibc's malloc_trim
// releases the free pages inside the heap too, not only at its top). For
// moments when nothing is timed and the memory held is about to change: a
// worker between two experiments.
inline void ReturnFreedMemory() { malloc_trim(0); }

}  // namespace testbed
