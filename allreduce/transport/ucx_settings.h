// UCX's words, read and chosen: which transports an endpoint's lanes use (for
// the results' transport column) and whether to ask UCX for peer failure
// detection. Kept beside the UCX transport so that what the testbed knows
// about UCX lives in one folder.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

namespace testbed {

// The transports/devices of an endpoint's lanes, from ucp_ep_print_info's
// text: "tcp/lo.0", "posix/memory+cma/memory".
std::string UcxLanes(const std::string& endpoint_info);

// Whether UCX endpoints should ask for peer failure detection: "auto" turns it
// on unless UCX_TLS names only transports that cannot provide it (UCX 1.13's
// shared memory), where asking for it would leave UCX no transport at all.
bool WantPeerErrorHandling(const std::string& setting, const char* ucx_tls);

}  // namespace testbed
