#include "common/link_units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>

namespace testbed {
namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits "1.5ms" into 1.5 and "ms"; fails on anything but digits, one '.', then letters.
bool SplitNumber(std::string_view text, double& value, std::string& unit) {
  std::size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) ||
                               text[end] == '.')) {
    ++end;
  }
  if (end == 0) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + end, value);
  if (ec != std::errc() || ptr != text.data() + end || !std::isfinite(value)) return false;
  unit = Lower(text.substr(end));
  return true;
}

std::string Trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return std::string(text);
}

}  // namespace

absl::StatusOr<double> ParseDuration(std::string_view raw) {
  const std::string text = Trim(raw);
  double value = 0;
  std::string unit;
  if (SplitNumber(text, value, unit)) {
    if (unit == "ns") return value * 1e-9;
    if (unit == "us") return value * 1e-6;
    if (unit == "ms") return value * 1e-3;
    if (unit == "s") return value;
    if (unit.empty() && value == 0) return 0.0;
  }
  return absl::InvalidArgumentError("bad duration '" + std::string(raw) +
                                    "' (a number and a unit: ns, us, ms, s; e.g. 50us)");
}

absl::StatusOr<double> ParseLinkRate(std::string_view raw) {
  const std::string text = Trim(raw);
  double value = 0;
  std::string unit;
  if (SplitNumber(text, value, unit) && value > 0) {
    double rate = 0;  // stays 0 for an unknown unit
    if (unit.empty() || unit == "bit") rate = value;
    if (unit == "kbit") rate = value * 1e3;
    if (unit == "mbit") rate = value * 1e6;
    if (unit == "gbit") rate = value * 1e9;
    // A number near DBL_MAX times its unit overflows to infinity: no rate.
    if (rate > 0 && std::isfinite(rate)) return rate;
  }
  return absl::InvalidArgumentError(
      "bad link rate '" + std::string(raw) +
      "' (bits per second, > 0: 100mbit, 1gbit, 10gbit, 500kbit or a plain number)");
}

absl::StatusOr<std::uint64_t> ParseLinkRateBps(std::string_view text) {
  absl::StatusOr<double> rate = ParseLinkRate(text);
  if (!rate.ok()) return rate.status();
  if (*rate < 1 || *rate > 1e15) {
    return absl::InvalidArgumentError("link rate '" + std::string(text) +
                                      "' is outside 1 bit/s .. 1000 Tbit/s");
  }
  return static_cast<std::uint64_t>(std::llround(*rate));
}

std::string FormatLinkRate(std::uint64_t bits_per_second) {
  for (const auto& [unit, scale] : {std::pair{"gbit", std::uint64_t{1000000000}},
                                    std::pair{"mbit", std::uint64_t{1000000}},
                                    std::pair{"kbit", std::uint64_t{1000}}}) {
    if (bits_per_second >= scale && bits_per_second % scale == 0) {
      return std::to_string(bits_per_second / scale) + unit;
    }
  }
  return std::to_string(bits_per_second) + "bit";
}

}  // namespace testbed
