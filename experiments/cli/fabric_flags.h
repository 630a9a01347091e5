// The fabric's flags, declared once for every subcommand that takes a fabric
// (local, run, traffic, model): a textproto file (experiments/fabrics/) and
// flags for the common cases, the flags overriding the file's fields.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "proto/fabric.pb.h"

namespace testbed {

struct FabricFlags {
  std::string file;      // --fabric
  proto::Fabric given;   // the fields the flags set, typed as they were read
  // The two enums are stored by AddEnumFlag; their options say whether they were
  // given (--placement packed is the default value, yet overrides a file's).
  proto::RankPlacement::Kind placement = proto::RankPlacement::packed;
  proto::ServerPlacement::Kind server_placement = proto::ServerPlacement::spine;
  const CLI::Option* placement_option = nullptr;
  const CLI::Option* server_placement_option = nullptr;
  int uplink_flags = 0;          // --uplink-rate and --oversubscription: one of them
};

void AddFabricFlags(CLI::App& cmd, FabricFlags& flags);

// `base` (a spec file's fabric, or none), then --fabric's file over it, then
// the flags over both; not yet checked against the workers (ValidateFabric).
absl::StatusOr<proto::Fabric> BuildFabric(const FabricFlags& flags, proto::Fabric base = {});

// The flags' fabric for `workers`, checked (ValidateFabric): what `traffic`
// and `model` read.
absl::StatusOr<proto::Fabric> FabricFor(const FabricFlags& flags, int workers);

}  // namespace testbed
