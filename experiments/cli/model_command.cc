#include "experiments/cli/model_command.h"


#include "absl/status/status.h"
#include "allreduce/cost_model.h"
#include "common/link_units.h"
#include "experiments/cli/cli_common.h"
#include "experiments/cli/setting_flags.h"
#include "proto/fabric_spec.h"
#include "proto/spec.h"

namespace testbed {
CLI::App* AddModelCommand(CLI::App& app, ModelOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "model",
      "The alpha-beta cost model (Thakur, Rabenseifner, Gropp) for each algorithm, read off "
      "its schedules (nothing is run): time = sum over rounds of (alpha + beta * the busiest "
      "link's bytes in that round), each rank's link full duplex.");
  AddWorkersAndBytes(*cmd, options.workers, options.bytes);
  AddAlphaFlag(*cmd, options.alpha_us);
  AddLinkRateFlag(*cmd, options.link_rate_bps);
  AddServersFlag(*cmd, options.servers);
  AddDtypeFlag(*cmd, options.dtype);
  cmd->add_option("-a,--algorithms", options.algorithms,
                  "Comma-separated, any of: " + CollectiveNames(Kinds::kAll) +
                      " (default: the all-reduces, " + CollectiveNames(Kinds::kDefaultAllReduce) + ")")
      ->delimiter(',')
      ->check(AlgorithmValidator());
  AddFormatFlag(*cmd, options.format);
  AddFabricFlags(*cmd, options.fabric);
  cmd->footer(
      "Columns: rounds; bottleneck_bytes = the busiest link's bytes, summed over rounds\n"
      "(a link carries max(sent, received) of its rank); model_time_us = alpha * rounds +\n"
      "beta * bottleneck_bytes; formula_bytes = total payload, the closed form of docs/design.md.\n"
      "ps: two rounds of N*M/S bytes through a shard's link (in, then out).\n"
      "On a fabric (--racks, --host-link, --fabric) a round lasts alpha plus its slowest\n"
      "link's time: every host link each way, and each rack's uplink carrying its ranks'\n"
      "sends to other racks; ps's shards sit on the spine, each behind a link at the\n"
      "link rate, so every push and value also crosses its worker's rack uplink.\n"
      "Example: testbed model --workers 8 --bytes 64MiB --alpha 50us --link-rate 10gbit");
  return cmd;
}

int RunModel(const ModelOptions& options, std::ostream& out, std::ostream& err) {
  const auto bytes = ParseByteSize(options.bytes);
  if (!bytes.ok()) {
    err << "error: " << bytes.status().message() << "\n";
    return 2;
  }
  if (options.link_rate_bps == 0) {
    err << "error: the model needs a --link-rate\n";
    return 2;
  }
  const DataType type = DataTypeOf(options.dtype);
  const auto element = static_cast<std::int64_t>(ElementSize(type));
  if (*bytes % element != 0) {
    err << "error: --bytes " << *bytes << " is not a whole number of " << Name(type) << " ("
        << element << "-byte) elements\n";
    return 2;
  }
  const LinkModel link{options.alpha_us * 1e-6, 8.0 / static_cast<double>(options.link_rate_bps)};
  const absl::StatusOr<proto::Fabric> fabric = FabricFor(options.fabric, options.workers);
  if (!fabric.ok()) {
    err << "error: " << fabric.status().message() << "\n";
    return 2;
  }
  if (fabric->server_placement() == proto::ServerPlacement::colocated && options.servers > options.workers) {
    err << "error: servers colocated with the workers need --servers <= --workers\n";
    return 2;
  }
  const Placement placement = PlacementOf(*fabric, options.workers);
  const bool on_fabric = placement.Racks(options.workers) > 1 || fabric->host_links_size() > 0 ||
                         fabric->server_placement() == proto::ServerPlacement::colocated;
  const LinkRates rates =
      LinkRatesOf(*fabric, options.workers, static_cast<double>(options.link_rate_bps));
  std::vector<std::string> names = options.algorithms;
  if (names.empty()) {
    const Kinds kinds = placement.Racks(options.workers) > 1 ? Kinds::kAllReduce
                                                              : Kinds::kDefaultAllReduce;
    for (const Collective* c : CollectivesOf(kinds)) names.emplace_back(c->name);
  }

  Table table({"algorithm", "workers", "bytes", "rounds", "bottleneck_bytes", "model_time_us",
               "formula_bytes"});
  const int n = options.workers;
  for (const std::string& name : names) {
    absl::StatusOr<CostEstimate> e =
        EstimateAlgorithm(name, n, options.servers, *bytes, element, link);
    if (e.ok() && on_fabric) {
      e = FindCollective(name)->has_schedule()
              ? EstimateOnFabric(*FindCollective(name), n, *bytes, element, link.alpha_s,
                                 placement, rates)
              : EstimateParameterServerOnFabric(n, options.servers, *bytes, element,
                                                link.alpha_s, placement, rates,
                                                ServerSitesOf(*fabric, static_cast<double>(
                                                                           options.link_rate_bps)));
    }
    if (!e.ok()) {
      err << "error: unknown algorithm '" << name << "'\n";
      return 2;
    }
    const std::int64_t formula = FindCollective(name)->formula_bytes(n, *bytes);
    table.AddRow({name, std::int64_t{n}, *bytes, std::int64_t{e->rounds}, e->bottleneck_bytes,
                  e->time_s * 1e6, formula});
  }
  table.Print(options.format, out);
  return 0;
}

}  // namespace testbed
