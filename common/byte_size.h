// Message sizes as people write them on a command line: "4096", "64KiB",
// "16MiB", "1GiB" (binary), "64K", "16M" (binary, as in nccl-tests), "64KB",
// "1MB" (decimal), with an optional "B" for plain bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace testbed {

absl::StatusOr<std::int64_t> ParseByteSize(std::string_view text);

// The shortest exact spelling: 65536 -> "64KiB", 1000 -> "1000B".
std::string FormatByteSize(std::int64_t bytes);

// `bytes` in the largest binary unit (B, KiB, ... EiB) that keeps the number
// at or above 1 (below 1024 unless in EiB), for people to read.
struct ScaledBytes {
  double value;
  const char* unit;
};
ScaledBytes ToBinaryUnit(double bytes);

// For messages, to four digits: "12 GiB", "1.004 KiB", "1000 B", "16 EiB".
std::string HumanByteSize(double bytes);

}  // namespace testbed
