#include "experiments/cli/setting_flags.h"

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "common/link_units.h"

namespace testbed {
namespace {

// The name CLI11 gives an option in its errors: the first long name, else
// the first (Option::get_name).
std::string ErrorName(const std::string& names) {
  std::string first, first_long;
  for (std::string_view rest = names; !rest.empty();) {
    const std::size_t comma = rest.find(',');
    const std::string name(rest.substr(0, comma));
    if (first.empty()) first = name;
    if (first_long.empty() && name.rfind("--", 0) == 0) first_long = name;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return first_long.empty() ? first : first_long;
}

}  // namespace

CLI::Option* AddParsedOption(CLI::App& cmd, const std::string& names, const std::string& help,
                             const std::string& value_name, ParseInto parse_into) {
  return cmd
      .add_option_function<std::string>(
          names,
          [parse_into = std::move(parse_into), name = ErrorName(names)](const std::string& text) {
            if (std::string why = parse_into(text); !why.empty()) {
              throw CLI::ValidationError(name, why);
            }
          },
          help)
      ->type_name("TEXT:" + value_name);
}

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
  return AddParsedOption(cmd, "--link-rate",
                         "Each node's link rate, both directions: 100mbit, 1gbit, 10gbit, or bits "
                         "per second. netns enforces it with tc tbf; the cost model's beta is "
                         "8 / rate seconds per byte",
                         "RATE", StoreParsed(&ParseLinkRateBps, bits_per_second))
      ->default_str(bits_per_second == 0 ? "" : FormatLinkRate(bits_per_second));
}

CLI::Option* AddAlphaFlag(CLI::App& cmd, double& alpha_us) {
  return AddParsedOption(cmd, "--alpha",
                         "The cost model's latency per round (50us, 2ms, 500ns, 0.001s), for "
                         "model_time_us",
                         "DURATION",
                         [&alpha_us](const std::string& text) -> std::string {
                           const absl::StatusOr<double> seconds = ParseDuration(text);
                           if (!seconds.ok()) return std::string(seconds.status().message());
                           alpha_us = *seconds * 1e6;
                           return "";
                         })
      ->default_str(absl::StrCat(alpha_us, "us"));
}

CLI::Option* AddLogDirFlag(CLI::App& cmd, std::string& log_dir) {
  return cmd.add_option("--log-dir", log_dir,
                        "Folder for the started daemons' logs (default: a new one under /tmp, "
                        "removed when the command succeeds)");
}

CLI::Option* AddFormatFlag(CLI::App& cmd, OutputFormat& format) {
  return AddParsedOption(cmd, "-f,--format",
                         "Rows on stdout: table, csv or json (one object per line)", "FORMAT",
                         [&format](const std::string& text) -> std::string {
                           const auto parsed = ParseOutputFormat(text);
                           if (!parsed) return "unknown format '" + text + "' (table, csv, json)";
                           format = *parsed;
                           return "";
                         })
      ->default_str(std::string(Name(format)));
}

CLI::Option* AddServersFlag(CLI::App& cmd, int& servers) {
  return cmd.add_option("--servers", servers, "Parameter-server shards S, for ps")
      ->check(CLI::Range(1, kMaxServers))
      ->capture_default_str();
}

}  // namespace testbed
