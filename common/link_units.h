// The cost model's units as people write them: a latency per round ("50us",
// "1.5ms") and a link rate in bits per second ("1gbit", as tc writes it).
#pragma once

#include <string_view>

#include "absl/status/statusor.h"

namespace testbed {

// "50us", "1.5ms", "10ns", "0.001s" -> seconds. A unit is required (0 may go without).
absl::StatusOr<double> ParseDuration(std::string_view text);
// "100mbit", "1gbit", "10gbit", "500kbit" (decimal, as tc writes them), or plain
// bits per second ("1000000000") -> bits per second, > 0.
absl::StatusOr<double> ParseLinkRate(std::string_view text);

}  // namespace testbed
