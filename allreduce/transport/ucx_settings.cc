#include "allreduce/transport/ucx_settings.h"

#include <algorithm>
#include <regex>
#include <vector>

#include "absl/strings/str_cat.h"

namespace testbed {

std::string UcxLanes(const std::string& endpoint_info) {
  static const std::regex kLane(R"(lane\[\d+\]:\s+\d+:(\S+))");
  std::vector<std::string> seen;
  for (std::sregex_iterator it(endpoint_info.begin(), endpoint_info.end(), kLane), end; it != end;
       ++it) {
    const std::string lane = (*it)[1].str();
    if (std::find(seen.begin(), seen.end(), lane) == seen.end()) seen.push_back(lane);
  }
  std::string joined;
  for (const std::string& lane : seen) absl::StrAppend(&joined, joined.empty() ? "" : "+", lane);
  return joined;
}

bool WantPeerErrorHandling(const std::string& setting, const char* ucx_tls) {
  if (setting == "on") return true;
  if (setting == "off") return false;
  if (ucx_tls == nullptr || *ucx_tls == '\0') return true;
  const std::string tls = ucx_tls;
  for (const char* network : {"tcp", "rc", "ud", "dc", "ib", "all"}) {
    if (tls.find(network) != std::string::npos) return true;
  }
  return false;
}

}  // namespace testbed
