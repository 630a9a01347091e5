// The cost model's units as people write them: a latency per round ("50us",
// "1.5ms") and a link rate in bits per second ("1gbit", as tc writes it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace testbed {

// "50us", "1.5ms", "10ns", "0.001s" -> seconds. A unit is required (0 may go without).
absl::StatusOr<double> ParseDuration(std::string_view text);
// "100mbit", "1gbit", "10gbit", "500kbit" (decimal, as tc writes them), or plain
// bits per second ("1000000000") -> bits per second, > 0.
absl::StatusOr<double> ParseLinkRate(std::string_view text);
// The same, as the whole bits per second a spec carries (1 .. 10^15): what
// the flags store, so nothing downstream parses a rate again.
absl::StatusOr<std::uint64_t> ParseLinkRateBps(std::string_view text);
// 1000000000 -> "1gbit", 100000000 -> "100mbit", 1500 -> "1500bit": the
// largest unit that divides the rate, as tc writes it.
std::string FormatLinkRate(std::uint64_t bits_per_second);

}  // namespace testbed
