#include "experiments/cli/model_command.h"


#include "absl/status/status.h"
#include "allreduce/cost_model.h"
#include "experiments/cli/cli_common.h"
#include "common/link_units.h"

namespace testbed {
CLI::App* AddModelCommand(CLI::App& app, ModelOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "model",
      "The alpha-beta cost model (Thakur, Rabenseifner, Gropp) for each algorithm, read off "
      "its schedules (nothing is run): time = sum over rounds of (alpha + beta * the busiest "
      "link's bytes in that round), each rank's link full duplex.");
  AddWorkersAndBytes(*cmd, options.workers, options.bytes);
  cmd->add_option("--alpha", options.alpha, "Latency per round: 50us, 2ms, 500ns, 0.001s")
      ->check(StatusValidator(&ParseDuration, "DURATION"))
      ->capture_default_str();
  cmd->add_option("--link-rate", options.link_rate,
                  "Each rank's link, in bit/s: 100mbit, 1gbit, 10gbit, or a plain number; "
                  "beta = 8 / rate seconds per byte")
      ->check(StatusValidator(&ParseLinkRate, "RATE"))
      ->capture_default_str();
  cmd->add_option("--servers", options.servers, "Parameter-server shards S for ps")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("-t,--dtype", options.dtype, "Element type; M must be a whole number of them")
      ->check(DataTypeValidator())
      ->capture_default_str();
  cmd->add_option("-a,--algorithms", options.algorithms,
                  "Comma-separated, any of: " + CollectiveNames(Kinds::kAll) +
                      " (default: the all-reduces, " + CollectiveNames(Kinds::kAllReduce) + ")")
      ->delimiter(',')
      ->check(AlgorithmValidator());
  cmd->add_option("-f,--format", options.format, "table, csv or json (one object per line)")
      ->check(FormatValidator())
      ->capture_default_str();
  cmd->footer(
      "Columns: rounds; bottleneck_bytes = the busiest link's bytes, summed over rounds\n"
      "(a link carries max(sent, received) of its rank); model_time_us = alpha * rounds +\n"
      "beta * bottleneck_bytes; formula_bytes = total payload, the closed form of docs/design.md.\n"
      "ps: two rounds of N*M/S bytes through a shard's link (in, then out).\n"
      "Example: testbed model --workers 8 --bytes 64MiB --alpha 50us --link-rate 10gbit");
  return cmd;
}

int RunModel(const ModelOptions& options, std::ostream& out, std::ostream& err) {
  const auto bytes = ParseByteSize(options.bytes);
  const auto alpha = ParseDuration(options.alpha);
  const auto rate = ParseLinkRate(options.link_rate);
  const auto type = ParseDataType(options.dtype);
  const auto format = ParseOutputFormat(options.format);
  for (const absl::Status& s : {bytes.status(), alpha.status(), rate.status()}) {
    if (!s.ok()) {
      err << "error: " << s.message() << "\n";
      return 2;
    }
  }
  if (!type || !format) {
    err << "error: bad --dtype or --format\n";
    return 2;
  }
  const auto element = static_cast<std::int64_t>(ElementSize(*type));
  if (*bytes % element != 0) {
    err << "error: --bytes " << *bytes << " is not a whole number of " << Name(*type) << " ("
        << element << "-byte) elements\n";
    return 2;
  }
  const LinkModel link{*alpha, 8.0 / *rate};
  std::vector<std::string> names = options.algorithms;
  if (names.empty()) {
    for (const Collective* c : CollectivesOf(Kinds::kAllReduce)) names.emplace_back(c->name);
  }

  Table table({"algorithm", "workers", "bytes", "rounds", "bottleneck_bytes", "model_time_us",
               "formula_bytes"});
  const int n = options.workers;
  for (const std::string& name : names) {
    const absl::StatusOr<CostEstimate> e =
        EstimateAlgorithm(name, n, options.servers, *bytes, element, link);
    if (!e.ok()) {
      err << "error: unknown algorithm '" << name << "'\n";
      return 2;
    }
    const std::int64_t formula = FindCollective(name)->formula_bytes(n, *bytes);
    table.AddRow({name, std::int64_t{n}, *bytes, std::int64_t{e->rounds}, e->bottleneck_bytes,
                  e->time_s * 1e6, formula});
  }
  table.Print(*format, out);
  return 0;
}

}  // namespace testbed
