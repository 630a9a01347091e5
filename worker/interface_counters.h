// A network interface's own byte counters (/sys/class/net/DEV/statistics),
// read around a measured iteration so results show what the network carried
// - headers, acknowledgements, retransmissions - next to the payload the
// algorithm moved. Meaningful only where each rank has its own interface (a
// container, a network namespace): on loopback all ranks share one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace testbed {

struct InterfaceBytes {
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
};

// nullopt when the device has no readable counters.
std::optional<InterfaceBytes> ReadInterfaceBytes(const std::string& device);

// The device whose counters describe this rank alone: `setting` if given
// ("none" for none), else the one device UCX_NET_DEVICES names ("eth0" of
// "eth0" or "eth0:1"), else none. Loopback is never one.
std::string RankNetDevice(const std::string& setting, const char* ucx_net_devices);

}  // namespace testbed
