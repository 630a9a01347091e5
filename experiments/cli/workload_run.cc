#include "experiments/cli/workload_run.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "experiments/workload/workload_trace.h"
#include "proto/enum_text.h"
#include "proto/spec.h"

namespace testbed {

absl::StatusOr<proto::ExperimentSpec> CollectiveSpec(const proto::WorkloadTrace& trace,
                                                     const TraceAlgorithms& algorithms,
                                                     const WorkloadRunSettings& settings,
                                                     const proto::WorkloadOp& op,
                                                     const proto::Communicator& c) {
  const int n = static_cast<int>(trace.world_size());
  const Collective* collective = AlgorithmOf(algorithms, op.kind());
  if (collective == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("no algorithm runs ", EnumText(op.kind())));
  }
  absl::StatusOr<RankGroups> groups = CommunicatorGroups(c, n);
  if (!groups.ok()) return groups.status();
  proto::ExperimentSpec spec;
  spec.set_name(absl::StrCat("workload: ", EnumText(c.role()), " ", EnumText(op.kind()), " of ",
                             op.bytes(), " bytes"));
  spec.set_workers(static_cast<std::uint32_t>(n));
  spec.add_algorithms(std::string(collective->name));
  spec.add_sizes(static_cast<std::int64_t>(op.bytes()));
  spec.set_dtype(trace.dtype());
  spec.set_iterations(settings.iterations);
  spec.set_warmup(1);
  spec.set_network(settings.network);
  spec.set_link_rate_bps(settings.link_rate_bps);
  *spec.mutable_fabric() = settings.fabric;
  spec.set_split(SplitText(*groups));
  ApplyDefaults(spec);
  if (absl::Status st = ValidateSpec(spec); !st.ok()) return st;
  return spec;
}

absl::StatusOr<MeasuredStep> RunStepOnDaemons(const proto::WorkloadTrace& trace,
                                              const TraceAlgorithms& algorithms,
                                              const WorkloadRunSettings& settings,
                                              double device_flops_per_s) {
  MeasuredStep out;
  const CollectiveTime measured = [&](const proto::WorkloadOp& op,
                                      const proto::Communicator& c) -> absl::StatusOr<double> {
    absl::StatusOr<proto::ExperimentSpec> spec = CollectiveSpec(trace, algorithms, settings, op, c);
    if (!spec.ok()) return spec.status();
    const std::string what = spec->name();
    RowSink sink(settings.local.experiment);
    if (const int code = RunLocalSpecs(settings.local, {*spec}, sink); code != 0) {
      return absl::InternalError(absl::StrCat(what, ": the daemons failed (exit ", code, ")"));
    }
    MeasuredCollective& ran = out.collectives.emplace_back();
    ran.op = op;
    ran.rows = sink.rows();
    for (const proto::ResultRow& row : ran.rows) {
      if (row.wrong() != 0 || row.bytes() != static_cast<std::int64_t>(op.bytes()) ||
          row.payload_bytes_total() != row.theory_bytes_total()) {
        return absl::InternalError(absl::StrCat(
            what, ", group ", row.group(), ": wrong ", row.wrong(), ", ", row.bytes(),
            " bytes, payload ", row.payload_bytes_total(), " of ", row.theory_bytes_total()));
      }
      if (row.workers() > 1) ran.seconds = std::max(ran.seconds, row.time_us_p50() * 1e-6);
    }
    return ran.seconds;
  };
  absl::StatusOr<StepSimulation> step = ReplayStep(trace, measured, device_flops_per_s);
  if (!step.ok()) return step.status();
  out.step = *std::move(step);
  return out;
}

}  // namespace testbed
