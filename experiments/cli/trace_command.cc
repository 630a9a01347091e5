#include "experiments/cli/trace_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "allreduce/chunking.h"
#include "allreduce/inprocess_run.h"
#include "experiments/cli/cli_common.h"
#include "experiments/cli/trace_inputs.h"
#include "proto/fabric_spec.h"

namespace testbed {
namespace {

// Values that tell their own story: with up to 9 ranks, rank r starts with
// 10^r, so each decimal digit of a sum says whether rank r's contribution is
// in it (1011 = ranks 0, 1 and 3). With more ranks, rank r starts with r + 1.
// Zero means "nothing here yet" (all-gather and broadcast inputs) and prints as '.'.
bool DigitEncoding(int workers) { return workers <= 9; }

double StartValue(int workers, int rank) {
  return DigitEncoding(workers) ? std::pow(10.0, rank) : rank + 1.0;
}

std::string PaddedValue(double value, int width) {
  char buf[64];
  if (value == 0) {
    std::snprintf(buf, sizeof buf, "%*s", width, ".");
  } else {
    std::snprintf(buf, sizeof buf, "%*.0f", width, value);
  }
  return buf;
}

void PrintBuffers(const std::vector<Bytes>& buffers, std::int64_t count, int width,
                  int max_elements, std::ostream& out) {
  for (std::size_t r = 0; r < buffers.size(); ++r) {
    char label[32];
    std::snprintf(label, sizeof label, "    rank %2zu: ", r);
    out << label;
    const std::int64_t shown = std::min<std::int64_t>(count, max_elements);
    for (std::int64_t i = 0; i < shown; ++i) {
      out << (i ? " " : "") << PaddedValue(LoadElement(DataType::kFloat64, buffers[r].data(), i), width);
    }
    if (shown < count) out << " ... (" << count - shown << " more)";
    out << "\n";
  }
}

// "[6,8)", and " = c3" when the range is exactly chunk 3 of the vector.
std::string Range(const Step& step, std::int64_t count, int workers) {
  std::string text = "[" + std::to_string(step.offset) + "," +
                     std::to_string(step.offset + step.count) + ")";
  if (step.count < count) {
    const int owner = ChunkOwner(count, workers, step.offset);
    const Chunk chunk = ChunkOf(count, workers, owner);
    if (chunk.offset == step.offset && chunk.count == step.count) {
      text += " = c" + std::to_string(owner);
    }
  }
  return text;
}

}  // namespace

CLI::App* AddTraceCommand(CLI::App& app, TraceOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "trace",
      "Walk through a collective round by round: who sends which elements to whom, whether "
      "the receiver reduces or copies, and every rank's buffer after each round of a real "
      "in-process run.");
  cmd->add_option("-a,--algorithm", options.algorithm,
                  "Collective: " + CollectiveNames(Kinds::kScheduled))
      ->check(CollectiveValidator(Kinds::kScheduled))
      ->capture_default_str();
  cmd->add_option("-n,--workers", options.workers, "Number of ranks N")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("-c,--count", options.count, "Elements in each rank's vector")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("-r,--root", options.root, "Root rank of broadcast and reduce")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-elements", options.max_elements,
                  "Print at most this many elements of each buffer")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  AddFabricFlags(*cmd, options.fabric);
  cmd->footer(
      "With racks (--racks, --fabric), sends between racks are marked and counted.\n"
      "Examples:\n  testbed trace --algorithm ring --workers 4 --count 8\n"
      "  testbed trace --algorithm hierarchical --workers 6 --racks 2 --count 6\n"
      "  testbed trace --algorithm butterfly --workers 6 --count 2\n"
      "  testbed trace --algorithm broadcast --workers 5 --root 2 --count 3");
  return cmd;
}

int RunTrace(const TraceOptions& options, std::ostream& out, std::ostream& err) {
  const Collective& c = *FindCollective(options.algorithm);
  const int n = options.workers;
  const std::int64_t count = options.count;
  if (options.root >= n) {
    err << "error: --root " << options.root << " is not a rank of " << n << " workers\n";
    return 2;
  }
  const int root = c.has_root() ? options.root : 0;
  const absl::StatusOr<proto::Fabric> fabric = FabricFor(options.fabric, n);
  if (!fabric.ok()) {
    err << "error: " << fabric.status().message() << "\n";
    return 2;
  }
  const Placement placement = PlacementOf(*fabric, n);
  const int racks = placement.Racks(n);

  out << c.name << " (" << Name(c.semantics) << "): " << c.summary << "\n";
  out << n << " ranks, " << count << " elements each";
  if (c.has_root()) out << ", root " << root;
  out << ".\n";
  if (n > 1 && count > 0) {
    out << "Chunks:";
    for (int i = 0; i < n; ++i) {
      const Chunk chunk = ChunkOf(count, n, i);
      out << " c" << i << "=[" << chunk.offset << "," << chunk.offset + chunk.count << ")";
    }
    out << "\n";
  }
  if (racks > 1) {
    const std::vector<std::vector<int>> members = placement.Members(n);
    out << "Racks:";
    for (std::size_t r = 0; r < members.size(); ++r) {
      out << " R" << r << " = ranks";
      for (int rank : members[r]) out << " " << rank;
      out << (r + 1 < members.size() ? ";" : "\n");
    }
  }
  if (DigitEncoding(n)) {
    out << "Rank r starts with 10^r, so each digit of a sum tells whose contributions it holds:\n"
           "1011 = ranks 0, 1 and 3. '.' = nothing there yet.\n";
  } else {
    out << "Rank r starts with r+1; a full sum is N(N+1)/2 = " << n * (n + 1) / 2
        << ". '.' = nothing there yet.\n";
  }

  const std::vector<Bytes> inputs = TraceInputs(c, n, count, root, &StartValue);
  const InProcessRun run = RunInProcess(
      c, inputs, {.type = DataType::kFloat64, .op = ReduceOp::kSum, .root = root,
                  .keep_snapshots = true, .placement = placement});
  for (int r = 0; r < n; ++r) {
    if (!run.status[r].ok()) {
      err << "error: rank " << r << ": " << run.status[r] << "\n";
      return 1;
    }
  }
  const int width = DigitEncoding(n) ? n : static_cast<int>(std::to_string(n * (n + 1) / 2).size());

  out << "\nbefore round 0\n";
  PrintBuffers(inputs, count, width, options.max_elements, out);
  std::vector<Schedule> schedules;
  for (int r = 0; r < n; ++r) schedules.push_back(c.Build(r, n, count, root, placement));
  std::int64_t elements_sent = 0;
  std::int64_t elements_across = 0;
  for (std::size_t k = 0; k < schedules[0].rounds.size(); ++k) {
    out << "\nround " << k << " (" << schedules[0].rounds[k].phase << ")\n";
    bool any = false;
    for (int r = 0; r < n; ++r) {
      for (const Step& send : schedules[r].rounds[k].steps) {
        if (send.kind != StepKind::kSend) continue;
        // The receiver's matching step says what it does with the data.
        StepKind action = StepKind::kRecvCopy;
        for (const Step& recv : schedules[send.peer].rounds[k].steps) {
          if (recv.IsReceive() && recv.peer == r) action = recv.kind;
        }
        const std::string range = Range(send, count, n);
        out << "  rank " << r << " -> rank " << send.peer << ": elements " << range << "; rank "
            << send.peer
            << (action == StepKind::kRecvReduce ? " adds them into its " : " stores them as its ")
            << range.substr(0, range.find(' '));
        const int from = placement.RackOf(r), to = placement.RackOf(send.peer);
        if (from != to) {
          out << "  (R" << from << " -> R" << to << ", across racks)";
          elements_across += send.count;
        }
        out << "\n";
        elements_sent += send.count;
        any = true;
      }
    }
    if (!any) out << "  (nothing to send)\n";
    PrintBuffers(run.snapshots[k], count, width, options.max_elements, out);
  }
  out << "\n" << schedules[0].rounds.size() << " rounds (formula "
      << c.formula_rounds(n, count, placement) << "); " << elements_sent
      << " elements sent in total (formula " << c.formula << " = " << c.formula_bytes(n, count)
      << ")";
  if (racks > 1) out << "; " << elements_across << " of them across racks";
  out << "\n";
  return 0;
}

}  // namespace testbed
