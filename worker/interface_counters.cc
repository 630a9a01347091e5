#include "worker/interface_counters.h"

#include <fstream>

namespace testbed {

std::optional<InterfaceBytes> ReadInterfaceBytes(const std::string& device) {
  if (device.empty()) return std::nullopt;
  const std::string dir = "/sys/class/net/" + device + "/statistics/";
  InterfaceBytes bytes;
  std::ifstream tx(dir + "tx_bytes"), rx(dir + "rx_bytes");
  if (!(tx >> bytes.sent) || !(rx >> bytes.received)) return std::nullopt;
  return bytes;
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
