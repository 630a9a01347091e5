#include "worker/interface_counters.h"

#include <fstream>
#include <sstream>

namespace testbed {

std::optional<InterfaceBytes> ParseProcNetDev(const std::string& text, const std::string& device) {
  // "  eth0: rx_bytes rx_packets errs drop fifo frame compressed multicast tx_bytes ..."
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto name_begin = line.find_first_not_of(' ');
    if (line.compare(name_begin, colon - name_begin, device) != 0 ||
        colon - name_begin != device.size()) {
      continue;
    }
    std::istringstream fields(line.substr(colon + 1));
    InterfaceBytes bytes;
    std::uint64_t skipped = 0;
    fields >> bytes.received;
    for (int i = 0; i < 7; ++i) fields >> skipped;
    fields >> bytes.sent;
    if (!fields) return std::nullopt;
    return bytes;
  }
  return std::nullopt;
}

std::optional<InterfaceBytes> ReadInterfaceBytes(const std::string& device) {
  if (device.empty()) return std::nullopt;
  std::ifstream file("/proc/self/net/dev");
  std::ostringstream text;
  text << file.rdbuf();
  return ParseProcNetDev(text.str(), device);
}

std::string RankNetDevice(const std::string& setting, const char* ucx_net_devices) {
  std::string device = setting;
  if (device.empty() && ucx_net_devices != nullptr) {
    device = ucx_net_devices;
    if (device.find(',') != std::string::npos || device == "all") device.clear();
    device = device.substr(0, device.find(':'));
  }
  if (device == "none" || device == "lo") return "";
  return device;
}

}  // namespace testbed
