#include "experiments/cli/traffic_command.h"

#include "allreduce/traffic.h"
#include "experiments/cli/cli_common.h"
#include "experiments/cli/setting_flags.h"
#include "proto/fabric_spec.h"
#include "proto/spec.h"

namespace testbed {

CLI::App* AddTrafficCommand(CLI::App& app, TrafficOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "traffic",
      "Payload bytes each all-reduce algorithm moves, counted from its schedules (nothing is "
      "run), beside the closed form: total over all ranks, the busiest rank's load, rounds.");
  AddWorkersAndBytes(*cmd, options.workers, options.bytes);
  AddDtypeFlag(*cmd, options.dtype);
  cmd->add_option("-a,--algorithms", options.algorithms,
                  "Comma-separated subset (default: naive,ring,tree,butterfly)")
      ->delimiter(',')
      ->check(CollectiveValidator(Kinds::kScheduled));
  AddFormatFlag(*cmd, options.format);
  AddFabricFlags(*cmd, options.fabric);
  cmd->footer(
      "Columns: total_bytes = payload sent by all ranks; max_rank_bytes = the busiest rank's\n"
      "busier direction (its link's load); formula_* = the closed forms of docs/design.md\n"
      "(hierarchical's rounds depend on the rack shapes, allreduce/ALGORITHMS.md);\n"
      "racks, cross_rack_bytes = of total_bytes, those sent to another rack, and\n"
      "max_uplink_bytes = the busiest uplink's busier direction (--racks or --fabric).\n"
      "Example: testbed traffic --workers 8 --bytes 64MiB --format csv\n"
      "         testbed traffic --workers 8 --racks 2 -a ring,hierarchical --placement packed");
  return cmd;
}

int RunTraffic(const TrafficOptions& options, std::ostream& out, std::ostream& err) {
  const std::int64_t bytes = *ParseByteSize(options.bytes);
  const DataType type = DataTypeOf(options.dtype);
  const auto element = static_cast<std::int64_t>(ElementSize(type));
  if (bytes % element != 0) {
    err << "error: --bytes " << bytes << " is not a whole number of " << Name(type) << " ("
        << element << "-byte) elements\n";
    return 2;
  }
  const absl::StatusOr<proto::Fabric> fabric = FabricFor(options.fabric, options.workers);
  if (!fabric.ok()) {
    err << "error: " << fabric.status().message() << "\n";
    return 2;
  }
  const Placement placement = PlacementOf(*fabric, options.workers);
  const int racks = placement.Racks(options.workers);
  std::vector<const Collective*> algorithms;
  for (const std::string& name : options.algorithms) algorithms.push_back(FindCollective(name));
  if (algorithms.empty()) {
    for (const Collective* c :
         CollectivesOf(racks > 1 ? Kinds::kAllReduce : Kinds::kDefaultAllReduce)) {
      if (c->has_schedule()) algorithms.push_back(c);
    }
  }

  Table table({"algorithm", "workers", "bytes", "total_bytes", "max_rank_bytes", "rounds",
               "formula_bytes", "formula_rounds", "racks", "cross_rack_bytes",
               "max_uplink_bytes", "formula"});
  for (const Collective* c : algorithms) {
    const TrafficSummary t = CountTraffic(*c, options.workers, bytes, element, 0, placement);
    std::int64_t max_uplink = 0;
    for (const UplinkTraffic& u : t.per_rack) {
      if (racks > 1) max_uplink = std::max({max_uplink, u.bytes_up, u.bytes_down});
    }
    table.AddRow({std::string(c->name), std::int64_t{options.workers}, bytes, t.total_bytes,
                  t.max_rank_bytes, std::int64_t{t.rounds},
                  c->formula_bytes(options.workers, bytes),
                  std::int64_t{c->formula_rounds(options.workers, bytes / element, placement)},
                  std::int64_t{racks},
                  t.cross_rack_bytes, max_uplink, std::string(c->formula)});
  }
  table.Print(options.format, out);
  return 0;
}

}  // namespace testbed
