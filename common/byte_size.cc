#include "common/byte_size.h"

#include <cctype>
#include <cmath>
#include <charconv>
#include <cstdio>
#include <iterator>
#include <limits>

#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

struct Unit {
  const char* suffix;
  std::int64_t factor;
};

constexpr Unit kUnits[] = {
    {"KiB", 1LL << 10}, {"MiB", 1LL << 20}, {"GiB", 1LL << 30}, {"TiB", 1LL << 40},
    {"KB", 1000},       {"MB", 1000000},    {"GB", 1000000000}, {"K", 1LL << 10},
    {"M", 1LL << 20},   {"G", 1LL << 30},   {"B", 1},
};

std::string_view Trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

}  // namespace

absl::StatusOr<std::int64_t> ParseByteSize(std::string_view text) {
  const std::string original(text);
  const auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad size '", original, "': ", std::string(why),
        " (write bytes as 4096, 64KiB, 16MiB, 1GiB, 64K, 1MB)"));
  };
  std::string_view digits = Trim(text);
  std::int64_t factor = 1;
  for (const Unit& unit : kUnits) {
    const std::string_view suffix(unit.suffix);
    if (digits.size() > suffix.size() && digits.ends_with(suffix)) {
      digits.remove_suffix(suffix.size());
      factor = unit.factor;
      break;
    }
  }
  digits = Trim(digits);
  if (digits.empty()) return bad("no number");
  if (digits.front() == '-') return bad("negative");
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return bad("not a whole number of bytes");
  }
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size()) return bad("too large");
  if (value > std::numeric_limits<std::int64_t>::max() / factor) return bad("too large");
  return value * factor;
}

ScaledBytes ToBinaryUnit(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  std::size_t unit = 0;
  while (std::fabs(bytes) >= 1024 && unit + 1 < std::size(kUnits)) {
    bytes /= 1024;
    ++unit;
  }
  return {bytes, kUnits[unit]};
}

std::string HumanByteSize(double bytes) {
  const ScaledBytes scaled = ToBinaryUnit(bytes);
  char text[32];
  std::snprintf(text, sizeof text, "%.4g %s", scaled.value, scaled.unit);
  return text;
}

std::string FormatByteSize(std::int64_t bytes) {
  constexpr Unit kBinary[] = {{"TiB", 1LL << 40}, {"GiB", 1LL << 30}, {"MiB", 1LL << 20},
                              {"KiB", 1LL << 10}};
  for (const Unit& unit : kBinary) {
    if (bytes >= unit.factor && bytes % unit.factor == 0) {
      return absl::StrCat(bytes / unit.factor, unit.suffix);
    }
  }
  return absl::StrCat(bytes, "B");
}

}  // namespace testbed
