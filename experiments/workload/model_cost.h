// What a model costs a training step, layer by layer, in the course's
// accounting (docs/workloads.md): each layer's parameters, its forward FLOPs
// per micro-batch (a backward is twice its forward), the activations it hands
// on, and the tensor-parallel all-reduces inside it. The trace generator
// (experiments/workload/trace_generator.h) reads this and nothing else of the
// model, so a new model is one function here.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/workload.pb.h"

namespace testbed {

// A piece of a layer's compute, between two of its tensor-parallel
// all-reduces (Megatron-LM: attention, then the MLP, each ends in one).
struct ComputePart {
  std::string_view name;  // "attention", "mlp", "matmul"
  double forward_flops = 0;
  // Whether it ends in an all-reduce of the layer's activations when split
  // over t > 1 ranks (forward; its backward has one too).
  bool tensor_parallel_all_reduce = false;
};

struct LayerCost {
  std::string name;         // "embedding", "block 3", "logits", "linear 1"
  std::int64_t parameters = 0;  // of the whole layer, before any split
  std::vector<ComputePart> parts;
  // Elements the layer hands to the next, per micro-batch: a pipeline stage
  // boundary's activations, and a tensor-parallel all-reduce's vector.
  std::int64_t output_elements = 0;
};

struct ModelCost {
  std::vector<LayerCost> layers;  // from the input side
  std::int64_t parameters = 0;    // their sum
  // Whether a tensor-parallel split applies (a transformer's blocks); it
  // divides every layer's parameters and FLOPs by t.
  bool splits_over_tensor_parallel = false;
  std::int64_t tensor_parallel_divisor = 1;  // what t must divide (h)
};

// Layers of the workload's model, costed per micro-batch (a transformer: its
// micro_batch samples; an MLP: its batch over the micro-batches).
absl::StatusOr<ModelCost> CostOfModel(const proto::Workload& workload);

// Models of well-known sizes for `testbed workload --model`: gpt2 (124M),
// gpt2-xl (1.5B), gpt3-2.7b, gpt3-6.7b, megatron-8.3b, and mlp (testbed
// train's default network, 784-128-10, batch 64).
absl::StatusOr<proto::Workload> PresetModel(std::string_view name);
std::string PresetModelNames();  // "gpt2, gpt2-xl, ..." for --help

}  // namespace testbed
