// One full frame of a TCP stream at a 1500-byte MTU, with TCP timestamps
// (Linux's default): what it occupies on the wire and what of it is payload.
// tc's shapers charge every frame's headers, so the emulated links
// (experiments/cluster/netns_fabric.cc) cut offloaded packets to what fits
// their buckets by it, and the simulator (allreduce/simulator/simulation.h)
// scales link rates by it.
#pragma once

#include <cstdint>

namespace testbed {

inline constexpr std::int64_t kEthernetFrameBytes = 1514;  // 14 Ethernet + 1500 IP
inline constexpr std::int64_t kFrameHeaderBytes = 66;      // Ethernet 14, IPv4 20, TCP 32
inline constexpr std::int64_t kFramePayloadBytes = kEthernetFrameBytes - kFrameHeaderBytes;

}  // namespace testbed
