#include "allreduce/transport/ucx_status.h"

#include "absl/strings/str_cat.h"

namespace testbed {

bool IsPeerFailure(ucs_status_t status) {
  switch (status) {
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_IO_ERROR:
      return true;
    default:
      return false;
  }
}

absl::Status UcsStatusToStatus(ucs_status_t status, std::string_view context) {
  if (status == UCS_OK) return absl::OkStatus();
  // Debian's absl has its own string_view, not std::string_view.
  std::string message = absl::StrCat(std::string(context), ": ", ucs_status_string(status));
  if (IsPeerFailure(status)) return absl::UnavailableError(message);
  switch (status) {
    case UCS_ERR_TIMED_OUT:
      return absl::DeadlineExceededError(message);
    case UCS_ERR_CANCELED:
      return absl::CancelledError(message);
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_NO_RESOURCE:
    case UCS_ERR_EXCEEDS_LIMIT:
      return absl::ResourceExhaustedError(message);
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
    case UCS_ERR_MESSAGE_TRUNCATED:
      return absl::InvalidArgumentError(message);
    case UCS_ERR_UNSUPPORTED:
      return absl::UnimplementedError(message);
    case UCS_ERR_NO_DEVICE:
    case UCS_ERR_NO_ELEM:
      return absl::NotFoundError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace testbed
