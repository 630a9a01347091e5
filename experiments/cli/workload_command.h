// `testbed workload`: one training step of a model under a parallel strategy
// (DDP, ZeRO 1-3, tensor, pipeline and data parallelism) as a trace
// (proto/workload.proto), generated (experiments/workload/trace_generator.h)
// or read from a file made elsewhere, and what it moves per kind of group and
// operation beside the course's closed forms, the memory per card and the
// pipeline's bubble (experiments/workload/step_summary.h); with --simulate,
// the step replayed on a simulated fabric: its time, compute, exposed and
// hidden communication, and whether it is compute- or communication-bound.
// docs/workloads.md.
#pragma once

#include <iosfwd>
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "experiments/cli/fabric_flags.h"
#include "experiments/cli/workload_flags.h"
#include "experiments/results/table.h"
#include "proto/spec.h"

namespace testbed {

struct WorkloadOptions {
  WorkloadFlags workload;
  std::string trace;  // --trace: a trace file to read instead of generating one
  std::string out;    // --out: where to write the trace
  std::string all_reduce = "ring";
  OutputFormat format = OutputFormat::kTable;
  // --simulate: the step replayed in the simulator (experiments/workload/step_simulation.h)
  // on the fabric, at the link rate, with compute at the device's stated rate.
  bool simulate = false;
  double device_tflops = 0;
  std::uint64_t link_rate_bps = 0;
  double alpha_us = kDefaultModelAlphaUs;
  FabricFlags fabric;
  // --run: every distinct collective on `testbed local`'s daemons, the step
  // replayed with their measured times (experiments/cli/workload_run.h).
  bool run = false;
  proto::Network::Kind network = proto::Network::loopback;
  std::uint32_t iterations = 3;
  // --timeline: the replayed steps' timeline (experiments/results/step_timeline.h).
  std::string timeline;
};

CLI::App* AddWorkloadCommand(CLI::App& app, WorkloadOptions& options);
int RunWorkload(const WorkloadOptions& options, std::ostream& out, std::ostream& err);

}  // namespace testbed
