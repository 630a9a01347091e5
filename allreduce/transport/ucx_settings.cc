#include "allreduce/transport/ucx_settings.h"

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <vector>

#include <ucs/memory/memory_type.h>

#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

// Settings that must be left to the user together: setting one of a group
// the user left alone beside one they chose could make a pair UCX refuses.
struct UcxDefaultGroup {
  std::vector<UcxSetting> settings;
};

// UCX's TCP transport moves data in 8 KiB (send) and 64 KiB (receive)
// segments by default; 256 KiB raised ring's bus bandwidth at 16 MiB by about
// 12% on loopback here, and moves the eager/rendezvous switch from 8 KiB to
// 256 KiB (ucx_info -e -u t). docs/speed.md, "Where the time goes", has what
// else was tried and left at UCX's own value.
const std::vector<UcxDefaultGroup>& DefaultGroups() {
  static const std::vector<UcxDefaultGroup> groups = {
      {{{"UCX_TCP_TX_SEG_SIZE", "256K"}, {"UCX_TCP_RX_SEG_SIZE", "256K"}}},
  };
  return groups;
}

}  // namespace

std::vector<UcxSetting> ApplyUcxDefaults() {
  std::vector<UcxSetting> applied;
  for (const UcxDefaultGroup& group : DefaultGroups()) {
    const bool user_set = std::any_of(group.settings.begin(), group.settings.end(),
                                      [](const UcxSetting& s) { return std::getenv(s.name.c_str()); });
    if (user_set) continue;
    for (const UcxSetting& setting : group.settings) {
      setenv(setting.name.c_str(), setting.value.c_str(), /*overwrite=*/0);
      applied.push_back(setting);
    }
  }
  return applied;
}

std::string DescribeUcxEnvironment(const char* const* environment,
                                   const std::vector<UcxSetting>& applied) {
  std::vector<std::string> settings;
  for (const char* const* entry = environment; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text = *entry;
    if (!text.starts_with("UCX_")) continue;
    const bool ours = std::any_of(applied.begin(), applied.end(), [&](const UcxSetting& s) {
      return text == s.name + "=" + s.value;
    });
    settings.push_back(ours ? text + "*" : text);
  }
  std::sort(settings.begin(), settings.end());
  std::string joined;
  for (const std::string& s : settings) absl::StrAppend(&joined, joined.empty() ? "" : " ", s);
  return joined;
}

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

std::string WithoutCudaLanes(const std::string& label) {
  if (label.empty()) return label;
  const std::size_t colon = label.find(':');
  const std::size_t start = colon == std::string::npos ? 0 : colon + 1;
  std::string kept;
  for (std::size_t begin = start; begin <= label.size();) {
    const std::size_t end = std::min(label.find('+', begin), label.size());
    const std::string lane = label.substr(begin, end - begin);
    if (!lane.starts_with("cuda_") && !lane.starts_with("gdr_copy")) {
      absl::StrAppend(&kept, kept.empty() ? "" : "+", lane);
    }
    begin = end + 1;
  }
  return label.substr(0, start) + (kept.empty() ? "unknown" : kept);
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

bool UcxHandlesCuda(std::uint64_t ucx_memory_types) {
  return (ucx_memory_types & (std::uint64_t{1} << UCS_MEMORY_TYPE_CUDA)) != 0;
}

absl::StatusOr<std::string> ResolveGpuPath(GpuPathRequest request, MemoryType memory,
                                           std::uint64_t ucx_memory_types) {
  const bool cuda_in_ucx = UcxHandlesCuda(ucx_memory_types);
  if (request == GpuPathRequest::kDirect && !cuda_in_ucx) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gpu_path direct refused: this UCX reports no CUDA memory (memory_types 0x",
        absl::Hex(ucx_memory_types), ", no CUDA bit): it was built without CUDA, or finds no "
        "GPU or driver; build it with .ci/build-ucx-cuda, or use gpu_path staged"));
  }
  if (HostAccessible(memory)) return std::string("none");
  if (request == GpuPathRequest::kDirect && memory != MemoryType::kCuda) {
    return absl::FailedPreconditionError(
        absl::StrCat("gpu_path direct refused: ", std::string(Name(memory)),
                     " memory is host pages UCX must not touch; it can only be staged"));
  }
  const bool direct = memory == MemoryType::kCuda && cuda_in_ucx &&
                      request != GpuPathRequest::kStaged;
  return std::string(direct ? "direct" : "staged");
}

}  // namespace testbed
