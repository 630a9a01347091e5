#include "common/optimizer.h"

#include <cstdio>
#include <cstdlib>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace testbed {

namespace {

// Filled before main() by the rules' static initializers; read-only after.
// A function's static, so it exists before the first registration whatever
// the order the files' initializers run in.
std::map<std::string, OptimizerFactory, std::less<>>& Registry() {
  static auto* registry = new std::map<std::string, OptimizerFactory, std::less<>>;
  return *registry;
}

}  // namespace

bool RegisterOptimizer(std::string_view name, OptimizerFactory factory) {
  const std::string key = absl::AsciiStrToLower(std::string(name));
  if (!Registry().emplace(key, factory).second) {  // two files claim one name
    std::fprintf(stderr, "optimizer '%s' registered twice\n", key.c_str());
    std::abort();
  }
  return true;
}

std::vector<std::string> OptimizerNames() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : Registry()) names.push_back(name);
  return names;
}

std::string OptimizerName(const proto::Optimizer& config) {
  return absl::AsciiStrToLower(proto::Optimizer::Kind_Name(config.kind()));
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(std::string_view name,
                                                         const proto::Optimizer& config) {
  const auto it = Registry().find(absl::AsciiStrToLower(std::string(name)));
  if (it == Registry().end()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown optimizer '", std::string(name),
                                                   "' (known: ",
                                                   absl::StrJoin(OptimizerNames(), ", "), ")"));
  }
  return it->second(config);
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const proto::Optimizer& config) {
  const std::string name = OptimizerName(config);
  if (name.empty()) {  // proto3 keeps enum values it has no name for
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown optimizer kind ", static_cast<int>(config.kind()), " (known: ",
        absl::StrJoin(OptimizerNames(), ", "), ")"));
  }
  return MakeOptimizer(name, config);
}

}  // namespace testbed
