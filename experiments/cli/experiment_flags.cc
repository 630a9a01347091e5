#include "experiments/cli/experiment_flags.h"

#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "allreduce/collective.h"
#include "allreduce/memory.h"
#include "common/byte_size.h"
#include "experiments/cli/cli_common.h"
#include "experiments/cli/setting_flags.h"
#include "experiments/cli/spec_file.h"
#include "common/limits.h"
#include "common/link_units.h"
#include "proto/spec.h"

namespace testbed {

std::vector<std::string> DefaultAlgorithms() {
  std::vector<std::string> names;
  for (const Collective* c : CollectivesOf(Kinds::kDefaultAllReduce)) names.emplace_back(c->name);
  return names;
}

void AddExperimentFlags(CLI::App& cmd, ExperimentFlags& f) {
  cmd.add_option("--spec", f.spec_file,
                 "Experiment spec in protobuf text format (experiments/specs/*.textproto); "
                 "flags given as well override its fields")
      ->check(CLI::ExistingFile);
  cmd.add_option("--name", f.name, "A name recorded with the results");
  cmd.add_option("-n,--workers", f.workers,
                 "Number of workers N; a list (2,4,8) sweeps over N, one cluster each")
      ->delimiter(',')
      ->check(CLI::Range(1, MaxWorkers(f.reader)))
      ->capture_default_str();
  cmd.add_option("-a,--algorithms", f.algorithms,
                 "Comma-separated, any of: " + CollectiveNames(Kinds::kAll) +
                     " (ps: the parameter server over gRPC; the others: schedules over UCX), "
                     "or auto: per size, the all-reduce this cluster's fitted alpha-beta model "
                     "predicts fastest (see --tuning)")
      ->delimiter(',')
      ->check(ExperimentAlgorithmValidator())
      ->capture_default_str();
  cmd.add_option("--tuning", f.tuning,
                 "For --algorithms auto: results files (--out of an earlier run on this "
                 "cluster) to fit each all-reduce's alpha and beta from, and whose times at "
                 "the sizes run decide there; without it a short calibration run of every "
                 "all-reduce at the requested sizes up to 4 MiB comes first")
      ->check(CLI::ExistingFile);
  AddServersFlag(cmd, f.servers);
  cmd.add_option("-s,--sizes", f.sizes,
                 "Bytes per worker: MIN:MAX (x4 steps, MAX included), MIN:MAX:xF, or a list "
                 "A,B,C; units KiB, MiB, GiB")
      ->capture_default_str();
  cmd.add_option("-i,--iters", f.iterations, "Timed iterations per size")
      ->check(CLI::Range(1, kMaxIterations))
      ->capture_default_str();
  cmd.add_option("-w,--warmup", f.warmup, "Untimed iterations before them")
      ->check(CLI::Range(0, kMaxIterations))
      ->capture_default_str();
  AddDtypeFlag(cmd, f.dtype);
  AddEnumFlag(cmd, "--op", f.op, "Reduction");
  cmd.add_flag("--no-check", f.no_check, "Skip verifying results (wrong is then -1)");
  cmd.add_option("--timeout", f.timeout_s, "Seconds one collective may take before it fails")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  cmd.add_option("-o,--out", f.out,
                 "Append results as JSON lines to this file: one 'experiment' record (spec, git "
                 "revision, host), then one 'result' record per row");
  cmd.add_option("--timeline", f.timeline,
                 "Write every row's ranks over time to this file as Chrome trace-event JSON "
                 "(open it in ui.perfetto.dev or chrome://tracing): a process per row, a track "
                 "per rank, a span per round with traffic (ps: its push and pull phases) with "
                 "peer and bytes, the slowest rank's track marked. Measured rows draw their "
                 "last timed iteration, simulated ones their one; up to " +
                     std::to_string(kMaxTimelineRanks) + " workers. docs/simulator.md");
  cmd.add_option("--split", f.split,
                 "Run each collective in groups at once, as nccl-tests' NCCL_TESTS_SPLIT: div:K "
                 "blocks of K consecutive ranks (inside racks of K, packed), mod:K K groups of "
                 "every K-th rank (across them); a row per group. Scheduled algorithms only");
  AddFormatFlag(cmd, f.format);
  AddNetworkFlag(cmd, f.network);
  AddLinkRateFlag(cmd, f.link_rate_bps);
  AddAlphaFlag(cmd, f.alpha_us);
  if (f.reader == SpecReader::kSimulator) {
    AddParsedOption(cmd, "--host-cost",
                    "What each byte a rank receives costs it before the message counts (its "
                    "reduce or copy), as a duration per byte: 0.5ns, 2ns. Default 0",
                    "DURATION",
                    [&f](const std::string& text) -> std::string {
                      const absl::StatusOr<double> seconds = ParseDuration(text);
                      if (!seconds.ok()) return std::string(seconds.status().message());
                      f.host_ns_per_byte = *seconds * 1e9;
                      return "";
                    });
  }
  AddParsedOption(cmd, "--segment",
                  "Pipelining of the scheduled collectives: off (whole steps, round by round), "
                  "auto (by message size), or SIZE: each step's message cut into segments of at "
                  "most SIZE bytes, each sent on as soon as it is reduced (e.g. 1MiB). "
                  "Default: auto for messages of 16MiB and more, whole steps below; staged "
                  "device memory is cut into M/16 within 256KiB-4MiB, so its copies overlap the "
                  "transfers (docs/speed.md)",
                  "SIZE|auto|off", StoreParsed(&ParseSegment, f.segment));
  AddEnumFlag(cmd, "--memory", f.memory,
              "Where each rank's vector lives - host; pinned or cuda (a build with CUDA, on a "
              "machine with a GPU; rank r uses GPU r mod the GPUs; device memory is staged "
              "through host memory over UCX); fake-device (host pages no code but the memory's "
              "own copies and reductions may touch: proves the staged path without a GPU)");
  AddFabricFlags(cmd, f.fabric);
  AddEnumFlag(cmd, "--gpu-path", f.gpu_path,
              "How device memory meets UCX - direct (device pointers to UCX's cuda_copy and "
              "cuda_ipc; refused before anything runs where UCX reports no CUDA memory, as "
              "Debian's does), staged (through host memory), or auto (direct where UCX reports "
              "CUDA memory and --memory is cuda, else staged); ps is always staged");
}

absl::Status ValidatePlacement(const proto::ExperimentSpec& spec) {
  const auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("bad experiment: ", parts...));
  };
  if (spec.link_rate_bps() != 0 && spec.network() != proto::Network::netns) {
    return bad("a link rate needs the netns network (loopback has no links to limit)");
  }
  const proto::Fabric& fabric = spec.fabric();
  if ((fabric.uplink_case() != proto::Fabric::UPLINK_NOT_SET || fabric.host_links_size() > 0 ||
       fabric.link_queue_us() != 0) &&
      spec.network() != proto::Network::netns) {
    return bad("uplink and host link rates and link queues need the netns network (loopback "
               "has no links to limit); racks and placement alone run anywhere");
  }
  if (spec.model_alpha_us() < 0 || !std::isfinite(spec.model_alpha_us())) {
    return bad("model_alpha_us must be a duration >= 0, not ", spec.model_alpha_us());
  }
  if (spec.model_host_ns_per_byte() < 0 || !std::isfinite(spec.model_host_ns_per_byte())) {
    return bad("model_host_ns_per_byte must be >= 0, not ", spec.model_host_ns_per_byte());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::int64_t>> ParseSizeList(const std::string& text) {
  std::vector<std::int64_t> sizes;
  const auto parse = [](std::string_view part) { return ParseByteSize(part); };
  if (text.find(':') == std::string::npos) {
    for (const std::string& part : std::vector<std::string>(absl::StrSplit(text, ','))) {
      absl::StatusOr<std::int64_t> size = parse(part);
      if (!size.ok()) return size.status();
      sizes.push_back(*size);
    }
  } else {
    std::vector<std::string> parts = absl::StrSplit(text, ':');
    if (parts.size() < 2 || parts.size() > 3) {
      return absl::InvalidArgumentError(absl::StrCat("bad size range '", text,
                                                     "': write MIN:MAX or MIN:MAX:xF"));
    }
    absl::StatusOr<std::int64_t> lo = parse(parts[0]);
    if (!lo.ok()) return lo.status();
    absl::StatusOr<std::int64_t> hi = parse(parts[1]);
    if (!hi.ok()) return hi.status();
    std::int64_t factor = 4;
    if (parts.size() == 3) {
      const std::string& f = parts[2];
      // from_chars, not stoll: a step too large for int64 is refused, not thrown.
      bool parsed = f.size() >= 2 && f[0] == 'x' &&
                    f.find_first_not_of("0123456789", 1) == std::string::npos;
      if (parsed) {
        const auto [end, error] = std::from_chars(f.data() + 1, f.data() + f.size(), factor);
        parsed = error == std::errc() && end == f.data() + f.size();
      }
      if (!parsed || factor < 2) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad size step '", f, "' in '", text, "': write x2, x4, x10, ..."));
      }
    }
    if (*lo > *hi || *lo <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad size range '", text, "': need 0 < MIN <= MAX"));
    }
    for (std::int64_t s = *lo; s <= *hi; s *= factor) {
      sizes.push_back(s);
      if (s > *hi / factor) break;
    }
    if (sizes.back() != *hi) sizes.push_back(*hi);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

absl::StatusOr<proto::ExperimentSpec> ReadSpecFile(const std::string& path) {
  proto::ExperimentSpec spec;
  if (absl::Status st = ReadSpecFileInto(path, spec, "spec"); !st.ok()) return st;
  return spec;
}

absl::StatusOr<proto::ExperimentSpec> BuildSpec(const ExperimentFlags& f, const CLI::App& cmd) {
  proto::ExperimentSpec spec;
  const bool from_file = !f.spec_file.empty();
  if (from_file) {
    absl::StatusOr<proto::ExperimentSpec> read = ReadSpecFile(f.spec_file);
    if (!read.ok()) return read.status();
    spec = *read;
  }
  // Without a spec file every flag counts (with its default); with one, only
  // the flags the user typed override it.
  const auto given = [&](const char* flag) { return !from_file || cmd.count(flag) > 0; };
  if (given("--name") && !f.name.empty()) spec.set_name(f.name);
  if (given("--workers")) {
    spec.set_workers(f.workers.front());
    spec.clear_worker_counts();
    if (f.workers.size() > 1) {
      for (int n : f.workers) spec.add_worker_counts(n);
    }
  }
  if (!spec.worker_counts().empty()) spec.set_workers(spec.worker_counts(0));
  if (given("--algorithms")) {
    spec.clear_algorithms();
    for (const std::string& a : f.algorithms) spec.add_algorithms(a);
  }
  if (given("--sizes")) {
    absl::StatusOr<std::vector<std::int64_t>> sizes = ParseSizeList(f.sizes);
    if (!sizes.ok()) return sizes.status();
    spec.clear_sizes();
    for (std::int64_t s : *sizes) spec.add_sizes(s);
  }
  if (given("--servers")) spec.set_servers(f.servers);
  if (given("--iters")) spec.set_iterations(f.iterations);
  if (given("--warmup")) spec.set_warmup(f.warmup);
  if (given("--dtype")) spec.set_dtype(f.dtype);
  if (given("--op")) spec.set_op(f.op);
  if (cmd.count("--no-check") > 0) spec.set_skip_check(true);
  if (given("--timeout")) spec.set_timeout_s(f.timeout_s);
  if (!f.timeline.empty()) spec.set_record_rounds(true);
  if (given("--split")) spec.set_split(f.split);
  if (given("--network")) spec.set_network(f.network);
  if (given("--link-rate")) spec.set_link_rate_bps(f.link_rate_bps);
  if (given("--alpha")) spec.set_model_alpha_us(f.alpha_us);
  if (f.reader == SpecReader::kSimulator && given("--host-cost")) {
    spec.set_model_host_ns_per_byte(f.host_ns_per_byte);
  }
  if (given("--segment")) *spec.mutable_segment() = f.segment;
  if (given("--memory")) spec.set_memory(f.memory);
  if (given("--gpu-path")) spec.set_gpu_path(f.gpu_path);
  absl::StatusOr<proto::Fabric> fabric = BuildFabric(f.fabric, spec.fabric());
  if (!fabric.ok()) return fabric.status();
  *spec.mutable_fabric() = *std::move(fabric);
  // Racks make the schedules that read them worth comparing: the default
  // list then includes them (hierarchical).
  if (!from_file && cmd.count("--algorithms") == 0 && spec.fabric().racks() > 1) {
    spec.clear_algorithms();
    for (const Collective* c : CollectivesOf(Kinds::kAllReduce)) spec.add_algorithms(std::string(c->name));
  }
  ApplyDefaults(spec);
  if (absl::Status st = ValidateSpec(spec, f.reader); !st.ok()) return st;
  if (absl::Status st = ValidatePlacement(spec); !st.ok()) return st;
  return spec;
}

}  // namespace testbed
