// The units people type: ParseByteSize ("64KiB"), ParseDuration ("50us") and
// ParseLinkRate ("1gbit"), ParseLinkRateBps and ParseSegment, each on the whole
// input; the last two spell back (FormatLinkRate, SegmentText) to the same value. Invariants: a byte size is
// >= 0 and FormatByteSize spells it back to the same value; a duration is
// finite and >= 0; a link rate is finite and > 0.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/byte_size.h"
#include "common/link_units.h"
#include "proto/spec.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const absl::StatusOr<std::int64_t> bytes = testbed::ParseByteSize(text); bytes.ok()) {
    FUZZ_CHECK(*bytes >= 0);
    const absl::StatusOr<std::int64_t> again = testbed::ParseByteSize(testbed::FormatByteSize(*bytes));
    FUZZ_CHECK(again.ok() && *again == *bytes);
  }
  if (const absl::StatusOr<double> seconds = testbed::ParseDuration(text); seconds.ok()) {
    FUZZ_CHECK(std::isfinite(*seconds) && *seconds >= 0);
  }
  if (const absl::StatusOr<double> rate = testbed::ParseLinkRate(text); rate.ok()) {
    FUZZ_CHECK(std::isfinite(*rate) && *rate > 0);
  }
  if (const absl::StatusOr<std::uint64_t> bps = testbed::ParseLinkRateBps(text); bps.ok()) {
    FUZZ_CHECK(*bps >= 1);
    const absl::StatusOr<std::uint64_t> again =
        testbed::ParseLinkRateBps(testbed::FormatLinkRate(*bps));
    FUZZ_CHECK(again.ok() && *again == *bps);
  }
  if (const auto segment = testbed::ParseSegment(text); segment.ok()) {
    const auto again = testbed::ParseSegment(testbed::SegmentText(*segment));
    FUZZ_CHECK(again.ok() && again->SerializeAsString() == segment->SerializeAsString());
  }
  return 0;
}
