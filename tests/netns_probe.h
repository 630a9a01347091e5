// Whether this test may build network namespaces: root, and a kernel that
// lets it make one (probed by making and deleting one). The suites of the
// emulated cluster skip themselves otherwise.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace testbed::testing {

inline bool CanBuildNamespaces() {
  if (geteuid() != 0) return false;
  const std::string probe = "tbprobe" + std::to_string(getpid());
  if (std::system(("ip netns add " + probe + " 2>/dev/null").c_str()) != 0) return false;
  return std::system(("ip netns del " + probe).c_str()) == 0;
}

}  // namespace testbed::testing
