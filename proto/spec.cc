#include "proto/spec.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/algorithm_choice.h"
#include "allreduce/collective.h"
#include "allreduce/segment_plan.h"
#include "common/byte_size.h"
#include "common/limits.h"
#include "proto/enum_text.h"
#include "proto/fabric_spec.h"

namespace testbed {

DataType DataTypeOf(proto::Dtype::Kind dtype) {
  switch (dtype) {
    case proto::Dtype::float64: return DataType::kFloat64;
    case proto::Dtype::int32: return DataType::kInt32;
    case proto::Dtype::float16: return DataType::kFloat16;
    default: return DataType::kFloat32;
  }
}

proto::Dtype::Kind DtypeOf(DataType type) {
  switch (type) {
    case DataType::kFloat64: return proto::Dtype::float64;
    case DataType::kInt32: return proto::Dtype::int32;
    case DataType::kFloat16: return proto::Dtype::float16;
    case DataType::kFloat32: break;
  }
  return proto::Dtype::float32;
}

ReduceOp ReduceOpOf(proto::Op::Kind op) {
  switch (op) {
    case proto::Op::min: return ReduceOp::kMin;
    case proto::Op::max: return ReduceOp::kMax;
    default: return ReduceOp::kSum;
  }
}

MemoryType MemoryTypeOf(proto::Memory::Kind memory) {
  switch (memory) {
    case proto::Memory::pinned: return MemoryType::kPinned;
    case proto::Memory::cuda: return MemoryType::kCuda;
    case proto::Memory::fake_device: return MemoryType::kFakeDevice;
    default: return MemoryType::kHost;
  }
}

absl::StatusOr<proto::Segment> ParseSegment(std::string_view text) {
  proto::Segment segment;
  if (text == "off") {
    segment.mutable_off();
  } else if (text == "auto") {
    segment.mutable_auto_();
  } else {
    absl::StatusOr<std::int64_t> bytes = ParseByteSize(text);
    if (!bytes.ok()) return bytes.status();
    if (*bytes <= 0 || *bytes > kMaxBytesPerWorker) {
      return absl::InvalidArgumentError(
          absl::StrCat("a segment is off, auto or 1 byte .. 4 GiB, not '", std::string(text), "'"));
    }
    segment.set_bytes(static_cast<std::uint64_t>(*bytes));
  }
  return segment;
}

std::string SegmentText(const proto::Segment& segment) {
  switch (segment.size_case()) {
    case proto::Segment::kOff: return "off";
    case proto::Segment::kAuto: return "auto";
    case proto::Segment::kBytes: return FormatByteSize(static_cast<std::int64_t>(segment.bytes()));
    case proto::Segment::SIZE_NOT_SET: break;
  }
  return "";
}

double ModelAlphaSeconds(const proto::ExperimentSpec& spec) {
  return (spec.has_model_alpha_us() ? spec.model_alpha_us() : kDefaultModelAlphaUs) * 1e-6;
}

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
  return spec.op() == proto::Op::sum && spec.dtype() != proto::Dtype::float16;
}

std::int64_t ElementBytes(const proto::ExperimentSpec& spec) {
  return static_cast<std::int64_t>(ElementSize(DataTypeOf(spec.dtype())));
}

void ApplyDefaults(proto::ExperimentSpec& spec) {
  if (spec.iterations() == 0) spec.set_iterations(kDefaultIterations);
  if (spec.timeout_s() == 0) spec.set_timeout_s(kDefaultTimeoutS);
  if (spec.servers() == 0) spec.set_servers(kDefaultServers);
  if (!spec.has_model_alpha_us()) spec.set_model_alpha_us(kDefaultModelAlphaUs);
}

namespace {

template <typename... Parts>
absl::Status Bad(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat("bad experiment: ", parts...));
}

// A value of an enum this build does not know arrives only from a newer peer
// or a hand-made message; text specs and flags name known values or fail.
template <typename Enum>
absl::Status KnownValue(const char* field, Enum value, bool (*valid)(int)) {
  if (valid(value)) return absl::OkStatus();
  return Bad("unknown ", field, " value ", static_cast<int>(value), " (", EnumTexts<Enum>(), ")");
}

absl::Status ValidateVocabulary(const proto::ExperimentSpec& spec) {
  for (absl::Status st : {KnownValue("dtype", spec.dtype(), proto::Dtype::Kind_IsValid),
                          KnownValue("op", spec.op(), proto::Op::Kind_IsValid),
                          KnownValue("network", spec.network(), proto::Network::Kind_IsValid),
                          KnownValue("memory", spec.memory(), proto::Memory::Kind_IsValid),
                          KnownValue("gpu_path", spec.gpu_path(), proto::GpuPath::Kind_IsValid)}) {
    if (!st.ok()) return st;
  }
  if (spec.segment().size_case() == proto::Segment::kBytes &&
      (spec.segment().bytes() == 0 ||
       spec.segment().bytes() > static_cast<std::uint64_t>(kMaxBytesPerWorker))) {
    return Bad("segment bytes must be 1..", kMaxBytesPerWorker, ", not ", spec.segment().bytes());
  }
  return absl::OkStatus();
}

absl::Status ValidateAlgorithms(const proto::ExperimentSpec& spec, SpecReader reader) {
  if (spec.algorithms().empty()) return Bad("no algorithms");
  for (const std::string& name : spec.algorithms()) {
    if (name == kAutoAlgorithm && reader == SpecReader::kCli) continue;
    const Collective* c = FindCollective(name);
    if (c == nullptr) {
      return Bad("unknown algorithm '", name, "' (choose from ", CollectiveNames(Kinds::kAll),
                 reader == SpecReader::kCli ? ", auto" : "", ")");
    }
    if (c->runs_on_parameter_server() && !ParameterServerCanReduce(spec)) {
      return spec.dtype() == proto::Dtype::float16
                 ? Bad(name, " holds float32, float64 or int32 tensors, not float16")
                 : Bad(name, " aggregates sums only, not ", EnumText(spec.op()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<int> WorkerCounts(const proto::ExperimentSpec& spec) {
  if (spec.worker_counts().empty()) return {static_cast<int>(spec.workers())};
  return {spec.worker_counts().begin(), spec.worker_counts().end()};
}

int MaxWorkers(SpecReader reader) {
  return reader == SpecReader::kSimulator ? kMaxSimulatedWorkers : kMaxWorkers;
}

absl::Status ValidateSpec(const proto::ExperimentSpec& spec, SpecReader reader) {
  if (absl::Status st = ValidateVocabulary(spec); !st.ok()) return st;
  const int max_workers = MaxWorkers(reader);
  if (spec.workers() < 1 || spec.workers() > static_cast<std::uint32_t>(max_workers)) {
    return Bad("workers must be 1..", max_workers, ", not ", spec.workers());
  }
  if (absl::Status st = ValidateAlgorithms(spec, reader); !st.ok()) return st;
  if (spec.servers() < 1 || spec.servers() > kMaxServers) {
    return Bad("servers must be 1..", kMaxServers);
  }
  if (spec.sizes().empty()) return Bad("no sizes");
  const DataType type = DataTypeOf(spec.dtype());
  const auto element = static_cast<std::int64_t>(ElementSize(type));
  for (std::int64_t size : spec.sizes()) {
    if (size < 0) return Bad("size ", size, " is negative (sizes are bytes per worker)");
    if (size % element != 0) {
      return Bad("size ", size, " is not a whole number of ", std::string(Name(type)), " (",
                 element, "-byte) elements");
    }
    if (size > kMaxBytesPerWorker) return Bad("size ", size, " is over 4 GiB per worker");
  }
  if (spec.iterations() > kMaxIterations) return Bad("iterations over ", kMaxIterations);
  if (absl::Status st = ValidateFabric(spec.fabric(), static_cast<int>(spec.workers())); !st.ok()) {
    return st;
  }
  if (spec.fabric().server_placement() == proto::ServerPlacement::colocated && UsesParameterServer(spec)) {
    for (int n : WorkerCounts(spec)) {
      if (static_cast<int>(spec.servers()) > n) {
        return Bad("servers colocated with the workers need servers <= workers, not ",
                   spec.servers(), " servers for ", n, " workers");
      }
    }
  }
  if (spec.record_rounds()) {
    for (int n : WorkerCounts(spec)) {
      if (n > kMaxTimelineRanks) {
        return Bad("a timeline (record_rounds, --timeline) records up to ", kMaxTimelineRanks,
                   " workers, not ", n);
      }
    }
  }
  if (!spec.split().empty()) {
    if (UsesParameterServer(spec)) {
      return Bad("split '", spec.split(), "' runs scheduled collectives in groups; ps serves "
                 "all the workers at once");
    }
    if (spec.record_rounds()) {
      return Bad("a timeline (record_rounds, --timeline) draws one group of all the workers; "
                 "drop split '", spec.split(), "' or the timeline");
    }
    for (int n : WorkerCounts(spec)) {
      if (absl::StatusOr<RankGroups> groups = GroupsOf(spec, n); !groups.ok()) {
        return Bad(std::string(groups.status().message()), " (at ", n, " workers)");
      }
    }
  }
  for (std::uint32_t n : spec.worker_counts()) {
    if (n < 1 || n > static_cast<std::uint32_t>(max_workers)) {
      return Bad("worker counts must be 1..", max_workers, ", not ", n);
    }
    if (absl::Status st = ValidateFabric(spec.fabric(), static_cast<int>(n)); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(st.message(), " (at ", n, " workers)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RankGroups> GroupsOf(const proto::ExperimentSpec& spec, int workers) {
  if (spec.split().empty()) return RankGroups::World(workers);
  return ParseSplit(spec.split(), workers);
}

std::size_t SegmentBytesFor(const proto::ExperimentSpec& spec, std::int64_t bytes, bool staged) {
  std::size_t segment = 0;
  switch (spec.segment().size_case()) {
    case proto::Segment::kOff: return 0;
    case proto::Segment::kAuto: segment = AutoSegmentBytes(bytes); break;
    case proto::Segment::kBytes: segment = static_cast<std::size_t>(spec.segment().bytes()); break;
    case proto::Segment::SIZE_NOT_SET: segment = DefaultSegmentBytes(bytes); break;
  }
  // Staged, whole steps would expose every copy down and up: unless the spec
  // says off, cut them.
  if (segment == 0 && staged) segment = StagedSegmentBytes(bytes);
  return segment;
}

}  // namespace testbed
