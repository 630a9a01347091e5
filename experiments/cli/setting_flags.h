// Each setting that several subcommands take, declared once: its flag, help
// text, default and check. A subcommand calls the Add function; the value it
// stores is already typed (an enum of proto/vocabulary.proto, bits per
// second, an OutputFormat), so nothing after the command line parses it
// again. A setting that `local` and `train` both take is one function here
// (docs/design.md, "Adding a setting").
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "experiments/results/table.h"
#include "proto/enum_text.h"
#include "proto/vocabulary.pb.h"

namespace testbed {

// An option whose values are the enum's (EnumTexts), stored as the enum; its
// default shown is the value's initial one.
template <typename Enum>
CLI::Option* AddEnumFlag(CLI::App& cmd, const std::string& names, Enum& value,
                         const std::string& help) {
  return cmd
      .add_option_function<std::string>(
          names, [&value](const std::string& text) { value = *ParseEnumText<Enum>(text); },
          help + ": " + EnumTexts<Enum>())
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            if (ParseEnumText<Enum>(text)) return "";
            return "unknown value '" + text + "' (choose from " + EnumTexts<Enum>() + ")";
          },
          "WORD"))
      ->default_str(EnumText(value));
}

CLI::Option* AddDtypeFlag(CLI::App& cmd, proto::Dtype::Kind& dtype);
CLI::Option* AddNetworkFlag(CLI::App& cmd, proto::Network::Kind& network);
// --link-rate RATE: stored as bits per second (0: unlimited, the default).
CLI::Option* AddLinkRateFlag(CLI::App& cmd, std::uint64_t& bits_per_second);
CLI::Option* AddLogDirFlag(CLI::App& cmd, std::string& log_dir);
CLI::Option* AddFormatFlag(CLI::App& cmd, OutputFormat& format);
// --servers S, 1..kMaxServers (common/limits.h).
CLI::Option* AddServersFlag(CLI::App& cmd, int& servers);

}  // namespace testbed
