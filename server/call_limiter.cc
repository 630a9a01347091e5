#include "server/call_limiter.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace testbed {

CallLimiter::Admission::~Admission() {
  if (limiter_ != nullptr) limiter_->in_progress_.fetch_sub(1);
}

absl::StatusOr<CallLimiter::Admission> CallLimiter::Admit() {
  // Count first, then look: two racing calls can never both take the last place.
  if (in_progress_.fetch_add(1) >= max_calls_) {
    in_progress_.fetch_sub(1);
    return absl::ResourceExhaustedError(
        absl::StrCat("this server already serves ", max_calls_,
                     " calls at once, its limit (testbed-server --max-calls)"));
  }
  return Admission(this);
}

}  // namespace testbed
