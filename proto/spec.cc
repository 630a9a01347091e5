#include "proto/spec.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "allreduce/algorithm_choice.h"
#include "allreduce/collective.h"
#include "allreduce/data_type.h"
#include "allreduce/memory.h"
#include "allreduce/segment_plan.h"
#include "common/byte_size.h"

namespace testbed {

bool UsesParameterServer(const proto::ExperimentSpec& spec) {
  for (const std::string& name : spec.algorithms()) {
    // auto may choose ps (for sums), so its shards must be there.
    if (name == kAutoAlgorithm && ParameterServerCanReduce(spec)) return true;
    const Collective* c = FindCollective(name);
    if (c != nullptr && c->runs_on_parameter_server()) return true;
  }
  return false;
}

bool ParameterServerCanReduce(const proto::ExperimentSpec& spec) {
  return (spec.op().empty() || spec.op() == "sum") && spec.dtype() != Name(DataType::kFloat16);
}

std::int64_t ElementBytes(const proto::ExperimentSpec& spec) {
  return static_cast<std::int64_t>(ElementSize(*ParseDataType(spec.dtype())));
}

void ApplyDefaults(proto::ExperimentSpec& spec) {
  if (spec.iterations() == 0) spec.set_iterations(10);
  if (spec.dtype().empty()) spec.set_dtype("float32");
  if (spec.op().empty()) spec.set_op("sum");
  if (spec.timeout_s() == 0) spec.set_timeout_s(60);
  if (spec.servers() == 0) spec.set_servers(1);
  if (spec.memory().empty()) spec.set_memory("host");
  if (spec.gpu_path().empty()) spec.set_gpu_path("auto");
}

absl::Status ValidateSpec(const proto::ExperimentSpec& spec, SpecReader reader) {
  const auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("bad experiment: ", parts...));
  };
  if (spec.workers() < 1 || spec.workers() > 1024) {
    return bad("workers must be 1..1024, not ", spec.workers());
  }
  if (spec.algorithms().empty()) return bad("no algorithms");
  for (const std::string& name : spec.algorithms()) {
    if (name == kAutoAlgorithm && reader == SpecReader::kCli) continue;
    const Collective* c = FindCollective(name);
    if (c == nullptr) {
      return bad("unknown algorithm '", name, "' (choose from ", CollectiveNames(Kinds::kAll),
                 reader == SpecReader::kCli ? ", auto" : "", ")");
    }
    if (c->runs_on_parameter_server() && !ParameterServerCanReduce(spec)) {
      return spec.dtype() == Name(DataType::kFloat16)
                 ? bad(name, " holds float32, float64 or int32 tensors, not float16")
                 : bad(name, " aggregates sums only, not ", spec.op());
    }
  }
  if (spec.servers() < 1 || spec.servers() > 64) return bad("servers must be 1..64");
  const auto type = ParseDataType(spec.dtype());
  if (!type) return bad("unknown dtype '", spec.dtype(), "' (", DataTypeNames(), ")");
  if (!ParseReduceOp(spec.op())) return bad("unknown op '", spec.op(), "' (sum, min, max)");
  if (spec.sizes().empty()) return bad("no sizes");
  const auto element = static_cast<std::int64_t>(ElementSize(*type));
  for (std::int64_t size : spec.sizes()) {
    if (size < 0) return bad("size ", size, " is negative (sizes are bytes per worker)");
    if (size % element != 0) {
      return bad("size ", size, " is not a whole number of ", std::string(Name(*type)), " (",
                 element, "-byte) elements");
    }
    if (size > (std::int64_t{4} << 30)) return bad("size ", size, " is over 4 GiB per worker");
  }
  if (spec.iterations() > 1000000) return bad("iterations over 1000000");
  if (!spec.memory().empty() && !ParseMemoryType(spec.memory())) {
    return bad("unknown memory '", spec.memory(), "' (", MemoryTypeNames(), ")");
  }
  if (spec.gpu_path() != "" && spec.gpu_path() != "auto" && spec.gpu_path() != "direct" &&
      spec.gpu_path() != "staged") {
    return bad("unknown gpu_path '", spec.gpu_path(), "' (auto, direct, staged)");
  }
  if (spec.segment() != "" && spec.segment() != "off" && spec.segment() != "auto") {
    const absl::StatusOr<std::int64_t> segment = ParseByteSize(spec.segment());
    if (!segment.ok() || *segment <= 0) {
      return bad("segment '", spec.segment(), "' is not off, auto or a positive size");
    }
  }
  return absl::OkStatus();
}

std::size_t SegmentBytesFor(const proto::ExperimentSpec& spec, std::int64_t bytes) {
  if (spec.segment().empty() || spec.segment() == "off") return 0;
  if (spec.segment() == "auto") return AutoSegmentBytes(bytes);
  return static_cast<std::size_t>(*ParseByteSize(spec.segment()));
}

}  // namespace testbed
