#include "experiments/workload/workload_trace.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "allreduce/data_type.h"
#include "common/limits.h"
#include "proto/spec.h"

namespace testbed {
namespace {

absl::Status Invalid(const std::string& what) { return absl::InvalidArgumentError(what); }

absl::Status ValidateCommunicator(const proto::Communicator& c, int index, int world,
                                  std::vector<int>& seen_in) {
  const std::string name = absl::StrCat("communicator ", index, " (", c.name(), ")");
  if (c.groups_size() == 0) return Invalid(name + " has no groups");
  const int size = c.groups(0).ranks_size();
  for (const proto::RankGroup& g : c.groups()) {
    if (g.ranks_size() == 0 || g.ranks_size() != size) {
      return Invalid(name + ": its groups must be non-empty and of one size");
    }
    for (std::uint32_t rank : g.ranks()) {
      if (rank >= static_cast<std::uint32_t>(world)) {
        return Invalid(absl::StrCat(name, ": rank ", rank, " is outside the world of ", world));
      }
      if (seen_in[rank] == index) {
        return Invalid(absl::StrCat(name, ": rank ", rank, " is in two of its groups"));
      }
      seen_in[rank] = index;
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateOp(const proto::WorkloadTrace& trace, int index, std::int64_t element) {
  const proto::WorkloadOp& op = trace.ops(index);
  const std::string name = absl::StrCat("operation ", index, " (", op.label(), ")");
  if (!proto::WorkloadOp::Kind_IsValid(op.kind())) return Invalid(name + ": unknown kind");
  if (op.communicator() >= static_cast<std::uint32_t>(trace.communicators_size())) {
    return Invalid(absl::StrCat(name, ": no communicator ", op.communicator()));
  }
  for (std::uint32_t dep : op.deps()) {
    if (dep >= static_cast<std::uint32_t>(index)) {
      return Invalid(absl::StrCat(name, ": depends on ", dep, ", not an earlier operation"));
    }
  }
  if (op.kind() == proto::WorkloadOp::compute) {
    if (!std::isfinite(op.flops()) || op.flops() < 0) return Invalid(name + ": FLOPs below 0");
    return absl::OkStatus();
  }
  if (op.bytes() == 0 || op.bytes() % static_cast<std::uint64_t>(element) != 0) {
    return Invalid(absl::StrCat(name, ": ", op.bytes(), " bytes is not a positive whole number of ",
                                element, "-byte elements"));
  }
  const proto::Communicator& c = trace.communicators(static_cast<int>(op.communicator()));
  if (op.kind() == proto::WorkloadOp::send_recv && c.groups(0).ranks_size() != 2) {
    return Invalid(name + ": a send-receive's groups are {from, to}");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTrace(const proto::WorkloadTrace& trace) {
  if (trace.version() != kWorkloadTraceVersion) {
    return Invalid(absl::StrCat("a workload trace of version ", trace.version(),
                                "; this build reads version ", kWorkloadTraceVersion));
  }
  const int world = static_cast<int>(trace.world_size());
  if (world < 1 || world > kMaxSimulatedWorkers) {
    return Invalid(absl::StrCat("world_size must be 1 .. ", kMaxSimulatedWorkers, ", not ",
                                trace.world_size()));
  }
  if (!proto::Dtype::Kind_IsValid(trace.dtype())) return Invalid("unknown dtype");
  if (trace.ops_size() > kMaxWorkloadOps) {
    return Invalid(absl::StrCat(trace.ops_size(), " operations; at most ", kMaxWorkloadOps));
  }
  std::vector<int> seen_in(static_cast<std::size_t>(world), -1);
  for (int c = 0; c < trace.communicators_size(); ++c) {
    if (absl::Status st = ValidateCommunicator(trace.communicators(c), c, world, seen_in);
        !st.ok()) {
      return st;
    }
  }
  const std::int64_t element = TraceElementBytes(trace);
  for (int i = 0; i < trace.ops_size(); ++i) {
    if (absl::Status st = ValidateOp(trace, i, element); !st.ok()) return st;
  }
  return absl::OkStatus();
}

std::string TraceJson(const proto::WorkloadTrace& trace) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(trace, &json, options);
  return json;
}

absl::StatusOr<proto::WorkloadTrace> ParseTraceJson(const std::string& json,
                                                    const std::string& path) {
  proto::WorkloadTrace trace;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &trace);
  if (!parsed.ok()) {
    return Invalid(absl::StrCat(path, ": not a workload trace: ", std::string(parsed.message())));
  }
  if (absl::Status st = ValidateTrace(trace); !st.ok()) {
    return Invalid(absl::StrCat(path, ": ", std::string(st.message())));
  }
  return trace;
}

absl::Status WriteTraceFile(const proto::WorkloadTrace& trace, const std::string& path) {
  std::ofstream out(path);
  out << TraceJson(trace);
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<proto::WorkloadTrace> ReadTraceFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseTraceJson(text.str(), path);
}

std::int64_t TraceElementBytes(const proto::WorkloadTrace& trace) {
  return static_cast<std::int64_t>(ElementSize(DataTypeOf(trace.dtype())));
}

absl::StatusOr<RankGroups> CommunicatorGroups(const proto::Communicator& c, int world_size) {
  std::vector<std::vector<int>> groups;
  for (const proto::RankGroup& g : c.groups()) groups.emplace_back(g.ranks().begin(), g.ranks().end());
  return GroupsOfMembers(std::move(groups), world_size);
}

}  // namespace testbed
