#include "experiments/cli/setting_flags.h"

#include "common/limits.h"
#include "common/link_units.h"

namespace testbed {

CLI::Option* AddDtypeFlag(CLI::App& cmd, proto::Dtype::Kind& dtype) {
  return AddEnumFlag(cmd, "-t,--dtype", dtype,
                     "Element type; sizes must be a whole number of them");
}

CLI::Option* AddNetworkFlag(CLI::App& cmd, proto::Network::Kind& network) {
  return AddEnumFlag(cmd, "--network", network,
                     "Where the started daemons run: loopback (one host, all on lo), or netns "
                     "(root: each daemon in its own network namespace behind its own "
                     "rate-limited link, an emulated cluster)");
}

CLI::Option* AddLinkRateFlag(CLI::App& cmd, std::uint64_t& bits_per_second) {
  return cmd
      .add_option_function<std::string>(
          "--link-rate",
          [&bits_per_second](const std::string& text) {
            bits_per_second = *ParseLinkRateBps(text);
          },
          "Each node's link rate, both directions: 100mbit, 1gbit, 10gbit, or bits per "
          "second. netns enforces it with tc tbf; the cost model's beta is 8 / rate "
          "seconds per byte")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            const auto rate = ParseLinkRateBps(text);
            return rate.ok() ? "" : std::string(rate.status().message());
          },
          "RATE"))
      ->default_str(bits_per_second == 0 ? "" : FormatLinkRate(bits_per_second));
}

CLI::Option* AddLogDirFlag(CLI::App& cmd, std::string& log_dir) {
  return cmd.add_option("--log-dir", log_dir,
                        "Folder for the started daemons' logs (default: a new one under /tmp, "
                        "removed when the command succeeds)");
}

CLI::Option* AddFormatFlag(CLI::App& cmd, OutputFormat& format) {
  return cmd
      .add_option_function<std::string>(
          "-f,--format",
          [&format](const std::string& text) { format = *ParseOutputFormat(text); },
          "Rows on stdout: table, csv or json (one object per line)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return ParseOutputFormat(text) ? "" : "unknown format '" + text + "' (table, csv, json)";
          },
          "FORMAT"))
      ->default_str(std::string(Name(format)));
}

CLI::Option* AddServersFlag(CLI::App& cmd, int& servers) {
  return cmd.add_option("--servers", servers, "Parameter-server shards S, for ps")
      ->check(CLI::Range(1, kMaxServers))
      ->capture_default_str();
}

}  // namespace testbed
