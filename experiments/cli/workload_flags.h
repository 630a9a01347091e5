// `testbed workload`'s settings, declared once (docs/design.md, "One typed
// spec"): a model (a preset, or a proto::Workload in protobuf text format,
// experiments/workloads/*.textproto) and flags for its sizes and the parallel
// strategy, the flags over the file's fields. The result is the typed
// proto::Workload (proto/workload.proto) that the generator reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "proto/workload.pb.h"

namespace testbed {

struct WorkloadFlags {
  std::string file;           // --workload
  std::string model = "gpt2";  // --model, a preset (experiments/workload/model_cost.h)
  proto::TransformerModel sizes;  // --layers ... : the fields given (0: not given)
  std::vector<std::uint32_t> mlp_hidden;
  std::uint32_t batch = 0;
  proto::ParallelStrategy strategy;  // --tp, --pp, --dp, --micro-batches, --bucket (0: not given)
  std::optional<std::uint32_t> zero_stage;
  proto::PipelineSchedule::Kind schedule = proto::PipelineSchedule::one_f_one_b;
  proto::Dtype::Kind dtype = proto::Dtype::float16;
  const CLI::Option* schedule_option = nullptr;
  const CLI::Option* dtype_option = nullptr;
};

void AddWorkloadFlags(CLI::App& cmd, WorkloadFlags& flags);

// The preset (or --workload's file), then the flags over it; checked by the
// generator, not here.
absl::StatusOr<proto::Workload> BuildWorkload(const WorkloadFlags& flags);

}  // namespace testbed
