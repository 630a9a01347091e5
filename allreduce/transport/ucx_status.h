// The one place where UCX's status codes become absl::Status. Everything in
// the UCX transport that can fail reports through here, so the error codes a
// caller sees (Unavailable for a lost peer, DeadlineExceeded for a timeout,
// ...) are chosen once.
//
// Thread-safety: pure functions.
#pragma once

#include <ucs/type/status.h>

#include <string_view>

#include "absl/status/status.h"

namespace testbed {

// Returns OkStatus() for UCS_OK; otherwise an error whose code fits `status`
// and whose message is "<context>: <UCX's own description>".
absl::Status UcsStatusToStatus(ucs_status_t status, std::string_view context);

// True for the statuses UCX uses when the remote side of an endpoint has gone
// away (connection reset, endpoint timeout, unreachable, ...).
bool IsPeerFailure(ucs_status_t status);

}  // namespace testbed
