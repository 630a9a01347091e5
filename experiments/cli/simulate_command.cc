#include "experiments/cli/simulate_command.h"

#include <chrono>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allreduce/collective.h"
#include "allreduce/simulator/simulation.h"
#include "common/byte_size.h"
#include "common/link_units.h"
#include "experiments/cli/simulate_validation.h"
#include "experiments/cli/submission.h"
#include "experiments/results/course_table.h"
#include "experiments/results/results_output.h"
#include "experiments/results/timeline.h"
#include "proto/enum_text.h"
#include "proto/fabric_spec.h"
#include "proto/result_aggregator.h"
#include "proto/spec.h"

namespace testbed {

CLI::App* AddSimulateCommand(CLI::App& app, SimulateOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Play the experiment `testbed local --network netns` would run on a simulator instead of "
      "processes: the same schedules (and the parameter server's chunked protocol) as flows "
      "on the spec's links - host links and rack uplinks, each direction shared max-min "
      "fairly - with --alpha per message. Same flags, spec files and rows (transport "
      "\"simulated\", one iteration: the model is deterministic), for up to " +
          std::to_string(MaxWorkers(SpecReader::kSimulator)) +
          " workers. Needs --link-rate; --segment plays the segment plan's dependencies as the "
          "executor does. docs/simulator.md");
  AddExperimentFlags(*cmd, options.experiment);
  cmd->add_option("--against", options.against,
                  "Instead of an experiment: re-simulate every row of these results files "
                  "(--out of measured netns runs) under the spec it ran with, and print "
                  "simulated against measured medians as Markdown - per algorithm the "
                  "geometric mean of |error| at 1 MiB and more and below it, then every "
                  "point. Alpha is fitted per family (schedules, ps) to the points under 1 MiB "
                  "unless --alpha is given; --host-cost applies")
      ->check(CLI::ExistingFile);
  cmd->footer(
      "Examples:\n"
      "  testbed simulate --link-rate 100mbit -n 4 -a ring,ps --servers 4 -s 16MiB\n"
      "  testbed simulate --link-rate 1gbit -n 64,512,4096 --racks 64 --oversubscription 4 \\\n"
      "      -a ring,hierarchical,tree -s 64MiB --out scale.jsonl\n"
      "  testbed simulate --spec experiments/specs/traffic_tradeoffs.textproto --format csv\n"
      "  testbed simulate --link-rate 100mbit -n 8 --racks 2 --oversubscription 4 \\\n"
      "      -a ring,hierarchical -s 16MiB --timeline racks.json\n"
      "  testbed simulate --against experiments/reference/simulator_validation.jsonl\n"
      "With --out R.jsonl it also writes R.md, the course table of every run in R.jsonl, where\n"
      "simulated rows stand apart from measured ones by their transport.");
  return cmd;
}

SimSetup SimSetupOf(const proto::ExperimentSpec& spec) {
  const int n = static_cast<int>(spec.workers());
  const auto link = static_cast<double>(spec.link_rate_bps());
  SimSetup setup;
  setup.placement = PlacementOf(spec.fabric(), n);
  // Every link carries TCP: its payload rate is below its wire rate.
  setup.rates = LinkRatesOf(spec.fabric(), n, link);
  for (double& bps : setup.rates.host_bps) bps *= kTcpPayloadPerWireByte;
  for (double& bps : setup.rates.uplink_bps) bps *= kTcpPayloadPerWireByte;
  setup.sites = ServerSitesOf(spec.fabric(), link);
  setup.sites.server_bps *= kTcpPayloadPerWireByte;
  setup.alpha_s = ModelAlphaSeconds(spec);
  setup.host_s_per_byte = spec.model_host_ns_per_byte() * 1e-9;
  if (LongestRankDelayMicros(spec.fabric()) > 0) {
    for (int r = 0; r < n; ++r) {
      setup.start_delay_s.push_back(static_cast<double>(RankDelayMicros(spec.fabric(), r)) * 1e-6);
    }
  }
  return setup;
}

namespace {

// A simulated rank's spans (SimSetup::record_spans) as the round ends a
// measured rank reports (RankResult.round_end_us), from its own start: a
// round without traffic has no span and ends where the one before it did.
void RecordRoundEnds(const SimRank& rank, double start_delay_s, proto::RankResult& result) {
  double end_us = 0;
  for (const SimSpan& span : rank.spans) {
    if (span.round >= 0) {
      while (result.round_end_us_size() < span.round) result.add_round_end_us(end_us);
    }
    end_us = (span.end_s - start_delay_s) * 1e6;
    result.add_round_end_us(end_us);
  }
}

// What each rank of a run would have reported: one iteration, unchecked.
std::vector<proto::RankResult> RankResults(const std::string& algorithm, std::int64_t bytes,
                                           const SimResult& sim, const SimSetup& setup) {
  const std::vector<double>& start_delay_s = setup.start_delay_s;
  std::vector<proto::RankResult> results;
  for (std::size_t r = 0; r < sim.ranks.size(); ++r) {
    const SimRank& rank = sim.ranks[r];
    proto::RankResult& result = results.emplace_back();
    result.set_rank(static_cast<std::uint32_t>(r));
    result.set_algorithm(algorithm);
    result.set_bytes(bytes);
    result.add_iteration_us(rank.time_s * 1e6);
    result.set_payload_bytes_sent(static_cast<std::uint64_t>(rank.bytes_sent));
    result.set_payload_bytes_received(static_cast<std::uint64_t>(rank.bytes_received));
    result.set_wrong(-1);
    result.set_transport(kSimulatedTransport);
    for (std::int64_t b : rank.shard_bytes) result.add_shard_payload_bytes(static_cast<std::uint64_t>(b));
    result.set_memory("host");
    result.set_gpu_path("none");
    result.set_segment_bytes(setup.segment_bytes);
    RecordRoundEnds(rank, start_delay_s.empty() ? 0 : start_delay_s[r], result);
  }
  return results;
}

// What the simulator cannot play of a spec that is otherwise valid.
absl::Status CheckSimulable(const proto::ExperimentSpec& spec) {
  const auto refuse = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("testbed simulate: ", parts...));
  };
  if (spec.network() != proto::Network::netns) {
    return refuse("it plays shaped links, as --network netns (its default) has; loopback has none");
  }
  if (spec.link_rate_bps() == 0) {
    return refuse("give --link-rate (each host's link, e.g. 100mbit): the links' rates are what "
                  "it simulates");
  }
  if (spec.memory() != proto::Memory::host) {
    return refuse("it simulates host memory only, not --memory ", EnumText(spec.memory()));
  }
  return absl::OkStatus();
}

std::string Deployment(const proto::ExperimentSpec& spec) {
  return absl::StrCat("simulated: flow-level, max-min fair links of ",
                      FormatLinkRate(spec.link_rate_bps()), " (payload ",
                      kTcpPayloadPerWireByte, " of each: TCP at MTU 1500), fabric ",
                      FabricSummary(spec.fabric()), ", alpha ", ModelAlphaSeconds(spec) * 1e6,
                      " us per message, host cost ", spec.model_host_ns_per_byte(), " ns/byte");
}

// Every (algorithm, size) of one N, into `sink` and `out` (if open).
absl::Status SimulateOneN(const proto::ExperimentSpec& spec, RowSink& sink, ResultsFile& out,
                          std::ostream& err) {
  for (const std::string& algorithm : spec.algorithms()) {
    for (std::int64_t bytes : spec.sizes()) {
      double wall_s = 0;
      absl::StatusOr<std::vector<proto::ResultRow>> rows =
          SimulateRows(spec, algorithm, bytes, &wall_s);
      if (!rows.ok()) return rows.status();
      for (const proto::ResultRow& row : *rows) {
        err << "testbed simulate: N = " << spec.workers() << ", " << algorithm << ", "
            << FormatByteSize(bytes) << GroupLabel(row, rows->size()) << ": " << row.time_us_avg() / 1e6
            << " s simulated in " << wall_s << " s" << std::endl;
        sink.Add(row);
        if (out.is_open()) {
          if (absl::Status st = out.Append(row); !st.ok()) return st;
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<proto::ResultRow>> SimulateRows(const proto::ExperimentSpec& spec,
                                                           const std::string& algorithm,
                                                           std::int64_t bytes, double* wall_s) {
  const Collective* collective = FindCollective(algorithm);
  if (collective == nullptr) return absl::InvalidArgumentError("unknown algorithm " + algorithm);
  const int n = static_cast<int>(spec.workers());
  if (spec.record_rounds()) {
    if (absl::Status st = CheckTimelineRanks(n); !st.ok()) return st;
  }
  SimSetup setup = SimSetupOf(spec);
  if (!spec.split().empty()) {
    absl::StatusOr<RankGroups> groups = GroupsOf(spec, n);
    if (!groups.ok()) return groups.status();
    setup.groups = *std::move(groups);
  }
  setup.record_spans = spec.record_rounds();
  setup.segment_bytes = SegmentBytesFor(spec, bytes, /*staged=*/false);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<SimResult> sim =
      collective->has_schedule()
          ? SimulateSchedule(*collective, n, bytes, ElementBytes(spec), setup)
          : SimulateParameterServer(n, static_cast<int>(spec.servers()), bytes,
                                    ElementBytes(spec), setup);
  if (wall_s != nullptr) {
    *wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (!sim.ok()) return sim.status();
  absl::StatusOr<std::vector<proto::ResultRow>> rows =
      AggregateRows(spec, RankResults(algorithm, bytes, *sim, setup));
  if (!rows.ok()) return rows.status();
  for (proto::ResultRow& row : *rows) AddModelTime(spec, row);
  return rows;
}

absl::StatusOr<proto::ResultRow> SimulateRow(const proto::ExperimentSpec& spec,
                                             const std::string& algorithm, std::int64_t bytes,
                                             double* wall_s) {
  absl::StatusOr<std::vector<proto::ResultRow>> rows = SimulateRows(spec, algorithm, bytes, wall_s);
  if (!rows.ok()) return rows.status();
  if (rows->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("split '", spec.split(), "' makes ",
                                                   rows->size(), " rows, not one"));
  }
  return rows->front();
}

namespace {

int RunValidation(const SimulateOptions& options, const CLI::App& command, std::ostream& err) {
  absl::StatusOr<std::vector<RecordedRun>> runs = ReadRecordedRuns(options.against);
  if (!runs.ok()) {
    err << "error: " << runs.status().message() << "\n";
    return 2;
  }
  const std::optional<double> alpha_us =
      command.count("--alpha") > 0 ? std::optional<double>(options.experiment.alpha_us)
                                   : std::nullopt;
  absl::StatusOr<Validation> validation =
      ValidateSimulator(*runs, alpha_us, options.experiment.host_ns_per_byte);
  if (!validation.ok()) {
    err << "error: " << validation.status().message() << "\n";
    return 2;
  }
  PrintValidation(*validation, absl::StrJoin(options.against, ", "), std::cout);
  return 0;
}

}  // namespace

int RunSimulate(const SimulateOptions& options, const CLI::App& command, std::ostream& err) {
  if (!options.against.empty()) return RunValidation(options, command, err);
  absl::StatusOr<proto::ExperimentSpec> spec = BuildSpec(options.experiment, command);
  if (spec.ok()) {
    if (absl::Status st = CheckSimulable(*spec); !st.ok()) spec = st;
  }
  if (!spec.ok()) {
    err << "error: " << spec.status().message() << "\n";
    return 2;
  }
  if (!CanWriteResults(options.experiment.out)) return 2;
  RowSink sink(options.experiment);
  for (int n : WorkerCounts(*spec)) {
    proto::ExperimentSpec one = *spec;
    one.set_workers(static_cast<std::uint32_t>(n));
    one.clear_worker_counts();
    ResultsFile out;
    absl::Status status = options.experiment.out.empty()
                              ? absl::OkStatus()
                              : out.Open(options.experiment.out, one, Deployment(one));
    if (status.ok()) {
      status = SimulateOneN(one, sink, out, err);
    }
    if (!status.ok()) {
      WriteTimelineIfAsked(options.experiment, *spec, sink, Deployment(*spec), err);
      sink.PrintTable();
      err << "error: " << status.message() << "\n";
      return 1;
    }
  }
  sink.PrintTable();
  if (!WriteTimelineIfAsked(options.experiment, *spec, sink, Deployment(*spec), err)) return 1;
  if (!options.experiment.out.empty()) {
    err << "results appended to " << options.experiment.out << "\n";
    const std::string markdown = CourseTablePathFor(options.experiment.out);
    if (absl::Status st = WriteCourseTable(options.experiment.out, markdown); st.ok()) {
      err << "course table (every run in that file) written to " << markdown << "\n";
    } else {
      err << "warning: no course table: " << st.message() << "\n";
    }
  }
  return 0;
}

}  // namespace testbed
