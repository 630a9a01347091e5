// The flags that describe an experiment, shared by `testbed local` and
// `testbed run`, and how they (or a textproto spec file) become an
// ExperimentSpec. Sizes: "4KiB:64MiB" (x4 steps, MAX included), "8:16MiB:x2",
// or a list "4096,1MiB,16MiB".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "experiments/cli/fabric_flags.h"
#include "experiments/results/table.h"
#include "proto/experiment.pb.h"
#include "proto/spec.h"

namespace testbed {

// The registry's all-reduces, the parameter server included: what an
// experiment compares unless told otherwise.
std::vector<std::string> DefaultAlgorithms();

// What the flags hold once parsed: typed values, each declared with its flag
// in AddExperimentFlags (or setting_flags.h when other subcommands take it).
// Defaults are the spec's own (proto/spec.h, proto/vocabulary.proto) but for
// those a person at a prompt wants: 4 workers, every algorithm, 4 KiB..16 MiB,
// 2 warm-up iterations.
struct ExperimentFlags {
  std::string spec_file;  // a textproto; the flags below then only override what is given
  std::string name;
  std::vector<int> workers = {4};  // several: a sweep over N (testbed local)
  int servers = kDefaultServers;
  std::vector<std::string> algorithms = DefaultAlgorithms();
  std::string sizes = "4KiB:16MiB";  // parsed once, by BuildSpec (ParseSizeList)
  int iterations = kDefaultIterations;
  int warmup = 2;
  proto::Dtype::Kind dtype = proto::Dtype::float32;
  proto::Op::Kind op = proto::Op::sum;
  bool no_check = false;
  int timeout_s = kDefaultTimeoutS;
  std::string out;  // JSON lines file
  // Chrome trace-event JSON of every row's ranks, round by round
  // (experiments/results/row_timeline.h); empty: none. Sets the spec's
  // record_rounds.
  std::string timeline;
  // The spec's split (proto/experiment.proto): "div:K" or "mod:K", a row per group.
  std::string split;
  OutputFormat format = OutputFormat::kTable;
  // Placement (testbed local) and the cost model's prediction per row.
  proto::Network::Kind network = proto::Network::loopback;
  std::uint64_t link_rate_bps = 0;  // netns: each node's link; 0 unlimited
  double alpha_us = kDefaultModelAlphaUs;
  double host_ns_per_byte = 0;  // the simulator's host cost (--host-cost, simulate only)
  proto::Segment segment;  // unset: by memory (proto/vocabulary.proto)
  proto::Memory::Kind memory = proto::Memory::host;
  proto::GpuPath::Kind gpu_path = proto::GpuPath::auto_;
  std::vector<std::string> tuning;  // auto: results files to fit from (else calibrate)
  FabricFlags fabric;  // racks, uplinks, placement (proto/fabric.proto)
  // Who takes the spec: the daemons through the CLI (auto allowed), or the
  // simulator (more workers, no auto). Set before AddExperimentFlags.
  SpecReader reader = SpecReader::kCli;
};

// Registers the flags on `command`.
void AddExperimentFlags(CLI::App& command, ExperimentFlags& flags);

// The spec the flags (and spec file, if any) describe, validated.
absl::StatusOr<proto::ExperimentSpec> BuildSpec(const ExperimentFlags& flags,
                                                const CLI::App& command);

// "4KiB:64MiB", "8:16MiB:x2", "4096,1MiB": sizes in bytes, ascending.
absl::StatusOr<std::vector<std::int64_t>> ParseSizeList(const std::string& text);

// The network fields of a spec: a known mode, a rate only for netns, a
// parsable rate and alpha.
absl::Status ValidatePlacement(const proto::ExperimentSpec& spec);

// A textproto ExperimentSpec; errors give the file, line and column.
absl::StatusOr<proto::ExperimentSpec> ReadSpecFile(const std::string& path);

}  // namespace testbed
