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
#include "proto/experiment.pb.h"

namespace testbed {

// The registry's all-reduces, the parameter server included: what an
// experiment compares unless told otherwise.
std::vector<std::string> DefaultAlgorithms();

struct ExperimentFlags {
  std::string spec_file;  // a textproto; the flags below then only override what is given
  std::string name;
  std::vector<int> workers = {4};  // several: a sweep over N (testbed local)
  int servers = 1;
  std::vector<std::string> algorithms = DefaultAlgorithms();
  std::string sizes = "4KiB:16MiB";
  int iterations = 10;
  int warmup = 2;
  std::string dtype = "float32";
  std::string op = "sum";
  bool no_check = false;
  int timeout_s = 60;
  std::string out;  // JSON lines file
  std::string format = "table";
  // Placement (testbed local) and the cost model's prediction per row.
  std::string network = "loopback";  // or "netns"
  std::string link_rate;             // netns: each node's link, e.g. "1gbit"
  std::string alpha = "50us";        // the model's latency per round
  std::string segment;               // pipelining: off, auto or a size; "" by memory
  std::string memory = "host";       // where each rank's vector lives
  std::string gpu_path = "auto";     // how device memory meets UCX: auto, direct, staged
  std::vector<std::string> tuning;   // auto: results files to fit from (else calibrate)
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

// --memory: a kind of memory allreduce/memory.h knows; the text back, or why not.
absl::StatusOr<std::string> ParseMemoryFlag(std::string_view text);

// --segment: "off", "auto" or a positive size; the text back, or why not.
absl::StatusOr<std::string> ParseSegmentFlag(std::string_view text);

// The worker counts a spec sweeps over: worker_counts, else {workers}.
std::vector<int> WorkerCounts(const proto::ExperimentSpec& spec);

// A textproto ExperimentSpec; errors give the file, line and column.
absl::StatusOr<proto::ExperimentSpec> ReadSpecFile(const std::string& path);

}  // namespace testbed
