// A network interface's own byte counters, read around a measured iteration so results show what the network carried
// - headers, acknowledgements, retransmissions - next to the payload the
// algorithm moved. Meaningful only where each rank has its own interface (a
// container, a network namespace): on loopback all ranks share one.
//
// They come from /proc/self/net/dev, which shows the reading process's own
// network namespace however it was entered. /sys/class/net shows the namespace
// whose sysfs is mounted: a process put in a namespace by `nsenter --net` (as
// tests/slurm/slurm_cluster_test.sh starts slurmd, and so the workers) would
// read the host's interface of that name there.
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

// The counters of `device` in the text of /proc/net/dev; nullopt when it has no line there.
std::optional<InterfaceBytes> ParseProcNetDev(const std::string& text, const std::string& device);

// The device whose counters describe this rank alone: `setting` if given
// ("none" for none), else the one device UCX_NET_DEVICES names ("eth0" of
// "eth0" or "eth0:1"), else none. Loopback is never one.
std::string RankNetDevice(const std::string& setting, const char* ucx_net_devices);

}  // namespace testbed
