#include "experiments/cli/workload_command.h"

#include <cmath>
#include <optional>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "experiments/cli/cli_common.h"
#include "experiments/cli/setting_flags.h"
#include "experiments/cli/simulate_command.h"
#include "experiments/cli/workload_run.h"
#include "experiments/results/step_timeline.h"
#include "experiments/workload/step_simulation.h"
#include "experiments/workload/step_summary.h"
#include "experiments/workload/trace_generator.h"
#include "experiments/workload/workload_trace.h"
#include "proto/enum_text.h"

namespace testbed {
namespace {

// Whether the trace's figure meets the closed form: exact up to the sum's
// rounding (both are sums of a few thousand doubles of whole bytes).
std::string Agreement(const TrafficLine& line) {
  if (!line.closed_form) return "-";
  const double scale = std::max(1.0, std::abs(*line.closed_form));
  return std::abs(line.busiest - *line.closed_form) <= 1e-9 * scale ? "yes" : "NO";
}

// Seconds the (role, kind)'s operations took in a replay, summed.
double SimulatedSeconds(const proto::WorkloadTrace& trace, const StepSimulation& sim,
                        const TrafficLine& line) {
  double seconds = 0;
  for (int i = 0; i < trace.ops_size(); ++i) {
    const proto::WorkloadOp& op = trace.ops(i);
    if (op.kind() == line.kind &&
        trace.communicators(static_cast<int>(op.communicator())).role() == line.role) {
      seconds += sim.ops[i].end_s - sim.ops[i].start_s;
    }
  }
  return seconds;
}

// A replayed step and how it was timed: "simulated" or "measured" (its
// traffic column is that with "_s", its step row says it).
struct ReplayColumn {
  std::string replay;
  const StepSimulation* step;
};

Table TrafficTable(const proto::WorkloadTrace& trace, const StepSummary& summary,
                   const std::vector<ReplayColumn>& replays) {
  std::vector<std::string> columns = {"group",        "operation", "ops",
                                      "vector_bytes", "sent_bytes", "busiest_rank",
                                      "busiest",      "closed_form", "agrees"};
  for (const ReplayColumn& r : replays) columns.push_back(r.replay + "_s");
  Table table(columns);
  for (const TrafficLine& line : summary.lines) {
    // Cell by cell into room made first: gcc 12 misreads a variant's move on
    // a reallocation here (-Wmaybe-uninitialized).
    std::vector<Cell> row;
    row.reserve(columns.size());
    row.emplace_back(EnumText(line.role));
    row.emplace_back(EnumText(line.kind));
    row.emplace_back(std::int64_t{line.ops});
    row.emplace_back(static_cast<std::int64_t>(line.vector_bytes));
    row.emplace_back(line.kind == proto::WorkloadOp::compute ? line.flops : line.sent_bytes);
    row.emplace_back(std::int64_t{line.busiest_rank});
    row.emplace_back(line.busiest);
    row.emplace_back(line.closed_form ? *line.closed_form : -1.0);
    row.emplace_back(Agreement(line));
    for (const ReplayColumn& r : replays) row.emplace_back(SimulatedSeconds(trace, *r.step, line));
    table.AddRow(std::move(row));
  }
  return table;
}

// The replay's step, for its critical rank: the profiling chapter's figures.
Table StepTable(const ReplayColumn& replay) {
  const StepSimulation& sim = *replay.step;
  const RankStep& r = sim.ranks[static_cast<std::size_t>(sim.critical_rank)];
  const double ratio = r.compute_s > 0 ? r.communication_s / r.compute_s : 0;
  Table table({"replay", "step_s", "critical_rank", "compute_s", "communication_s", "exposed_s",
               "overlap_s", "idle_s", "communication_over_compute", "verdict"});
  table.AddRow({replay.replay, sim.step_s, std::int64_t{sim.critical_rank}, r.compute_s,
                r.communication_s, r.exposed_s(), r.overlap_s, r.idle(sim.step_s), ratio,
                std::string(ratio > 1 ? "communication-bound" : "compute-bound")});
  return table;
}

absl::StatusOr<StepSimulation> Replay(const WorkloadOptions& options,
                                      const proto::WorkloadTrace& trace,
                                      const TraceAlgorithms& algorithms) {
  if (options.link_rate_bps == 0 || !(options.device_tflops > 0)) {
    return absl::InvalidArgumentError("--simulate needs --link-rate and --device-tflops");
  }
  const int n = static_cast<int>(trace.world_size());
  absl::StatusOr<proto::Fabric> fabric = FabricFor(options.fabric, n);
  if (!fabric.ok()) return fabric.status();
  proto::ExperimentSpec spec;
  spec.set_workers(static_cast<std::uint32_t>(n));
  spec.set_link_rate_bps(options.link_rate_bps);
  spec.set_model_alpha_us(options.alpha_us);
  *spec.mutable_fabric() = *fabric;
  return SimulateStep(trace, algorithms, SimSetupOf(spec), options.device_tflops * 1e12);
}

absl::StatusOr<MeasuredStep> RunOnDaemons(const WorkloadOptions& options,
                                           const proto::WorkloadTrace& trace,
                                           const TraceAlgorithms& algorithms) {
  if (!(options.device_tflops > 0)) return absl::InvalidArgumentError("--run needs --device-tflops");
  absl::StatusOr<proto::Fabric> fabric = FabricFor(options.fabric, static_cast<int>(trace.world_size()));
  if (!fabric.ok()) return fabric.status();
  WorkloadRunSettings settings;
  settings.network = options.network;
  settings.link_rate_bps = options.link_rate_bps;
  settings.fabric = *fabric;
  settings.iterations = options.iterations;
  return RunStepOnDaemons(trace, algorithms, settings, options.device_tflops * 1e12);
}

// Each distinct collective's rows, a line per group of more than one rank.
Table MeasuredTable(const proto::WorkloadTrace& trace, const MeasuredStep& measured) {
  Table table({"group", "operation", "vector_bytes", "algorithm", "group_index", "group_ranks",
               "time_us_p50", "payload_bytes", "theory_bytes", "cross_rack_bytes", "wrong"});
  for (const MeasuredCollective& ran : measured.collectives) {
    const proto::Communicator& c = trace.communicators(static_cast<int>(ran.op.communicator()));
    for (const proto::ResultRow& row : ran.rows) {
      if (row.workers() < 2) continue;
      std::vector<Cell> cells;
      cells.reserve(11);
      cells.emplace_back(EnumText(c.role()));
      cells.emplace_back(EnumText(ran.op.kind()));
      cells.emplace_back(static_cast<std::int64_t>(ran.op.bytes()));
      cells.emplace_back(row.algorithm());
      cells.emplace_back(std::int64_t{row.group()});
      cells.emplace_back(absl::StrJoin(row.group_ranks(), ";"));
      cells.emplace_back(row.time_us_p50());
      cells.emplace_back(static_cast<std::int64_t>(row.payload_bytes_total()));
      cells.emplace_back(static_cast<std::int64_t>(row.theory_bytes_total()));
      cells.emplace_back(static_cast<std::int64_t>(row.cross_rack_theory_bytes()));
      cells.emplace_back(row.wrong());
      table.AddRow(std::move(cells));
    }
  }
  return table;
}

void PrintHeader(const proto::WorkloadTrace& trace, std::ostream& out) {
  out << "step: " << trace.ops_size() << " operations on " << trace.world_size() << " ranks";
  if (trace.has_generated_from()) {
    const proto::ParallelStrategy& s = trace.generated_from().strategy();
    const auto one = [](std::uint32_t v) { return v == 0 ? 1u : v; };
    out << absl::StrFormat(" (t = %d, p = %d, d = %d, m = %d, ZeRO %d, %s)", one(s.tensor_parallel()),
                           one(s.pipeline_parallel()), one(s.data_parallel()),
                           one(s.micro_batches()), s.zero_stage(),
                           EnumText(s.pipeline_schedule()));
    out << absl::StrFormat("; model %.4g parameters", trace.parameters());
  }
  out << ", " << EnumText(trace.dtype()) << "\n";
}

// The calculator's memory per card for every stage, the run's marked, and the bubble.
void PrintMemory(const StepSummary& summary, std::ostream& out) {
  if (summary.memory.empty()) return;
  out << absl::StrFormat(
      "\nmemory per card, %.4g parameters over d = %d (weights, gradients, Adam's state; "
      "16 B each):\n",
      summary.card_parameters, summary.data_parallel);
  for (const ZeroStage& z : summary.memory) {
    out << absl::StrFormat("  ZeRO %d  %8.2f GB  traffic %.2gx DDP  shards %s%s\n", z.stage,
                           z.bytes_per_gpu / 1e9, z.traffic_vs_ddp, z.sharded,
                           z.stage == summary.zero_stage ? "   <- this step" : "");
  }
  if (summary.bubble) {
    out << absl::StrFormat(
        "\nbubble (p-1)/(m+p-1) = %.4f; activations a stage holds: GPipe %d, 1F1B %d "
        "micro-batches\n",
        summary.bubble->bubble_fraction, summary.bubble->gpipe_activations,
        summary.bubble->one_f_one_b_activations);
  }
}

// Before anything runs: a timeline needs a replay, and a world it can draw.
absl::Status CheckTimelineOptions(const WorkloadOptions& options,
                                  const proto::WorkloadTrace& trace) {
  if (options.timeline.empty()) return absl::OkStatus();
  if (!options.simulate && !options.run) {
    return absl::InvalidArgumentError("--timeline draws a replay: add --simulate or --run");
  }
  return CheckTimelineRanks(static_cast<int>(trace.world_size()));
}

// A process per replay, the simulated one first.
absl::Status WriteStepTimelines(const WorkloadOptions& options, const proto::WorkloadTrace& trace,
                                const TraceAlgorithms& algorithms,
                                const std::vector<ReplayColumn>& replays) {
  std::vector<TimelineRow> rows;
  for (const ReplayColumn& r : replays) {
    rows.push_back(StepTimeline(
        trace, algorithms, *r.step,
        absl::StrCat("step, ", r.replay == "simulated" ? "simulated" : "measured on the daemons",
                     " (", trace.world_size(), " ranks, ", trace.ops_size(), " operations)")));
  }
  const std::string about = absl::StrCat(
      "testbed workload, compute at ", options.device_tflops, " TFLOP/s, links at ",
      options.link_rate_bps, " bit/s", options.run ? absl::StrCat(", on ", EnumText(options.network)) : "");
  return WriteTimeline(options.timeline, rows, about);
}

absl::StatusOr<proto::WorkloadTrace> TraceOf(const WorkloadOptions& options) {
  if (!options.trace.empty()) return ReadTraceFile(options.trace);
  absl::StatusOr<proto::Workload> workload = BuildWorkload(options.workload);
  if (!workload.ok()) return workload.status();
  return GenerateTrace(*workload);
}

}  // namespace

CLI::App* AddWorkloadCommand(CLI::App& app, WorkloadOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "workload",
      "One training step's communication under DDP, ZeRO 1-3, tensor and pipeline "
      "parallelism, as a trace: bytes per group and operation beside the "
      "course's closed forms, memory per card, the pipeline's bubble; replayed in the simulator "
      "(--simulate) or on real daemons (--run).");
  AddWorkloadFlags(*cmd, options.workload);
  cmd->add_option("--trace", options.trace,
                  "Read this trace (JSON, docs/workloads.md) instead of generating one")
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", options.out, "Write the step's trace here, as JSON");
  cmd->add_option("-a,--algorithm", options.all_reduce,
                  "The all-reduce whose closed form counts the bytes")
      ->check(CollectiveValidator(Kinds::kScheduledAllReduce))
      ->capture_default_str();
  AddFormatFlag(*cmd, options.format);
  cmd->add_flag("--simulate", options.simulate,
                "Replay the step in the simulator: compute at --device-tflops, communication on "
                "the fabric at --link-rate (docs/workloads.md)");
  cmd->add_option("--device-tflops", options.device_tflops,
                  "Each card's sustained rate in TFLOP/s, for the replay's compute")
      ->check(CLI::Range(1e-6, 1e6));
  cmd->add_flag("--run", options.run,
                "Replay the step on real daemons (testbed local's, on --network): every distinct "
                "collective run and checked with its communicator's groups, then the step with "
                "their measured medians and compute at --device-tflops (docs/workloads.md)");
  AddNetworkFlag(*cmd, options.network);
  cmd->add_option("-i,--iters", options.iterations,
                  "With --run: timed iterations of each collective (their median is its time)")
      ->check(CLI::Range(1, kMaxIterations))
      ->capture_default_str();
  AddLinkRateFlag(*cmd, options.link_rate_bps);
  AddAlphaFlag(*cmd, options.alpha_us);
  AddFabricFlags(*cmd, options.fabric);
  cmd->add_option("--timeline", options.timeline,
                  "With --simulate or --run: write the replayed step as trace-event JSON "
                  "(Perfetto, chrome://tracing): per rank a track for compute and one per "
                  "communicator, a span per operation");
  cmd->footer(
      "Ranks: tensor-parallel index fastest, then data-parallel, then stage (Megatron-LM's\n"
      "order). Columns: vector_bytes = the operations' vectors, one group's each; sent_bytes\n"
      "= payload sent by every rank (compute: FLOPs); busiest = the busiest rank's share;\n"
      "closed_form = the course's formula for that rank (docs/workloads.md), -1: none.\n"
      "With --simulate: simulated_s = the operations' replayed time, summed; then the step's\n"
      "time, and for its critical rank compute, communication, exposed (not hidden behind\n"
      "compute) and idle time, and the verdict. With --run: measured_s likewise, from the\n"
      "collectives' medians on the daemons, and a row per group of each collective run.\n"
      "Example: testbed workload --model gpt2 --dp 8 --zero 3\n"
      "         testbed workload --model gpt2 --tp 4 --dp 2 --racks 2 --simulate \\\n"
      "           --link-rate 10gbit --device-tflops 100\n"
      "         testbed workload --model megatron-8.3b --tp 8 --pp 4 --dp 2 --micro-batches 32");
  return cmd;
}

int RunWorkload(const WorkloadOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<proto::WorkloadTrace> trace = TraceOf(options);
  if (!trace.ok()) {
    err << "error: " << trace.status().message() << "\n";
    return 2;
  }
  if (absl::Status st = CheckTimelineOptions(options, *trace); !st.ok()) {
    err << "error: " << st.message() << "\n";
    return 2;
  }
  if (!options.out.empty()) {
    if (absl::Status st = WriteTraceFile(*trace, options.out); !st.ok()) {
      err << "error: " << st.message() << "\n";
      return 1;
    }
  }
  TraceAlgorithms algorithms = DefaultTraceAlgorithms();
  algorithms.all_reduce = FindCollective(options.all_reduce);
  const StepSummary summary = SummarizeStep(*trace, algorithms);
  std::optional<StepSimulation> sim;
  if (options.simulate) {
    absl::StatusOr<StepSimulation> replayed = Replay(options, *trace, algorithms);
    if (!replayed.ok()) {
      err << "error: " << replayed.status().message() << "\n";
      return 2;
    }
    sim = *std::move(replayed);
  }
  std::optional<MeasuredStep> measured;
  if (options.run) {
    absl::StatusOr<MeasuredStep> ran = RunOnDaemons(options, *trace, algorithms);
    if (!ran.ok()) {
      err << "error: " << ran.status().message() << "\n";
      return ran.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
    measured = *std::move(ran);
  }
  std::vector<ReplayColumn> replays;
  if (sim) replays.push_back({"simulated", &*sim});
  if (measured) replays.push_back({"measured", &measured->step});
  if (!options.timeline.empty()) {
    if (absl::Status st = WriteStepTimelines(options, *trace, algorithms, replays); !st.ok()) {
      err << "error: " << st.message() << "\n";
      return 1;
    }
    const char* steps = sim && measured ? "simulated and measured steps"
                        : sim               ? "simulated step"
                                            : "measured step";
    err << "timeline of the " << steps << " written to " << options.timeline << "\n";
  }
  const bool table = options.format == OutputFormat::kTable;
  if (table) PrintHeader(*trace, out);
  TrafficTable(*trace, summary, replays).Print(options.format, out);
  if (measured) {
    if (table) out << "\ncollectives measured on the daemons (a row per group):\n";
    MeasuredTable(*trace, *measured).Print(options.format, out);
  }
  for (const ReplayColumn& r : replays) {
    if (table) {
      out << "\n" << r.replay << " step (compute at " << options.device_tflops << " TFLOP/s):\n";
    }
    StepTable(r).Print(options.format, out);
  }
  if (table) PrintMemory(summary, out);
  return 0;
}

}  // namespace testbed
