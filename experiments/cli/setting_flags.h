// Each setting that several subcommands take, declared once: its flag, help
// text, default and check. A subcommand calls the Add function; the value it
// stores is already typed (an enum of proto/vocabulary.proto, bits per
// second, an OutputFormat), so nothing after the command line parses it
// again. A setting that `local` and `train` both take is one function here
// (docs/design.md, "Adding a setting").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "experiments/results/table.h"
#include "proto/enum_text.h"
#include "proto/vocabulary.pb.h"

namespace testbed {

// Reads an option's text into its typed value: "" when it took the text,
// else why not, in one line.
using ParseInto = std::function<std::string(const std::string& text)>;

// An option whose text is parsed once, by `parse_into`, as the command line
// is read; what it refuses is the option's error ("--segment: ..."), worded
// as CLI11 words its own checks. `value_name` shows in --help (TEXT:SIZE).
CLI::Option* AddParsedOption(CLI::App& cmd, const std::string& names, const std::string& help,
                             const std::string& value_name, ParseInto parse_into);

// The usual ParseInto: what `parse` returns, stored in `value` (a T, or
// anything a T assigns to, such as std::optional<T>); its status's message
// when it refuses.
template <typename T, typename Value>
ParseInto StoreParsed(absl::StatusOr<T> (*parse)(std::string_view), Value& value) {
  return [parse, &value](const std::string& text) -> std::string {
    absl::StatusOr<T> parsed = parse(text);
    if (!parsed.ok()) return std::string(parsed.status().message());
    value = *std::move(parsed);
    return "";
  };
}

// An option whose values are the enum's (EnumTexts), stored as the enum; its
// default shown is the value's initial one.
template <typename Enum>
CLI::Option* AddEnumFlag(CLI::App& cmd, const std::string& names, Enum& value,
                         const std::string& help) {
  return AddParsedOption(cmd, names, help + ": " + EnumTexts<Enum>(), "WORD",
                         [&value](const std::string& text) -> std::string {
                           const auto parsed = ParseEnumText<Enum>(text);
                           if (!parsed) {
                             return "unknown value '" + text + "' (choose from " +
                                    EnumTexts<Enum>() + ")";
                           }
                           value = *parsed;
                           return "";
                         })
      ->default_str(EnumText(value));
}

CLI::Option* AddDtypeFlag(CLI::App& cmd, proto::Dtype::Kind& dtype);
CLI::Option* AddNetworkFlag(CLI::App& cmd, proto::Network::Kind& network);
// --link-rate RATE: stored as bits per second (0: unlimited, the default).
CLI::Option* AddLinkRateFlag(CLI::App& cmd, std::uint64_t& bits_per_second);
// --alpha DURATION: the cost model's latency per round, stored in microseconds.
CLI::Option* AddAlphaFlag(CLI::App& cmd, double& alpha_us);
CLI::Option* AddLogDirFlag(CLI::App& cmd, std::string& log_dir);
CLI::Option* AddFormatFlag(CLI::App& cmd, OutputFormat& format);
// --servers S, 1..kMaxServers (common/limits.h).
CLI::Option* AddServersFlag(CLI::App& cmd, int& servers);

}  // namespace testbed
