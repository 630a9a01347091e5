#include "experiments/workload/model_cost.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

// The largest model the generator takes: its byte counts stay well inside
// 64 bits and its FLOPs inside a double's exact integers.
constexpr std::int64_t kMaxDimension = 1 << 20;

absl::StatusOr<ModelCost> TransformerCost(const proto::TransformerModel& m) {
  const std::array<std::pair<const char*, std::uint32_t>, 5> dims = {{
      {"layers", m.layers()},
      {"hidden", m.hidden()},
      {"sequence", m.sequence()},
      {"micro_batch", m.micro_batch()},
      {"vocabulary", m.vocabulary()},
  }};
  for (const auto& [name, value] : dims) {
    if (value < 1 || value > kMaxDimension) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the transformer's ", name, " must be 1 .. ", kMaxDimension, ", not ", value));
    }
  }
  const double b = m.micro_batch(), s = m.sequence(), h = m.hidden(), v = m.vocabulary();
  const std::int64_t hidden = m.hidden();
  const std::int64_t activations = std::int64_t{m.micro_batch()} * m.sequence() * hidden;
  ModelCost cost;
  cost.splits_over_tensor_parallel = true;
  cost.tensor_parallel_divisor = hidden;
  // Token and position embeddings; the output projection reuses the token
  // embedding (tied), so the logits layer adds FLOPs and no parameters.
  cost.layers.push_back({"embedding", (std::int64_t{m.vocabulary()} + m.sequence()) * hidden,
                         {{"lookup", 0, false}}, activations});
  for (std::uint32_t l = 0; l < m.layers(); ++l) {
    // Attention: QKV and output projections 8bsh^2, scores and their use on
    // the values 4bs^2h; the MLP's two matmuls 16bsh^2 (Megatron-LM's count).
    cost.layers.push_back({absl::StrCat("block ", l), 12 * hidden * hidden + 13 * hidden,
                           {{"attention", 8 * b * s * h * h + 4 * b * s * s * h, true},
                            {"mlp", 16 * b * s * h * h, true}},
                           activations});
  }
  cost.layers.push_back({"logits", 0, {{"logits", 2 * b * s * h * v, false}},
                         std::int64_t{m.micro_batch()} * m.sequence() * m.vocabulary()});
  return cost;
}

absl::StatusOr<ModelCost> MlpCost(const proto::MlpModel& m, std::uint32_t micro_batches) {
  if (m.layer_sizes_size() < 2) {
    return absl::InvalidArgumentError("an MLP needs at least its inputs and classes");
  }
  for (std::uint32_t size : m.layer_sizes()) {
    if (size < 1 || size > kMaxDimension) {
      return absl::InvalidArgumentError(
          absl::StrCat("an MLP's layer sizes must be 1 .. ", kMaxDimension, ", not ", size));
    }
  }
  if (m.batch() < 1 || m.batch() % micro_batches != 0) {
    return absl::InvalidArgumentError(absl::StrCat("the MLP's batch (", m.batch(),
                                                   ") must be a positive multiple of the ",
                                                   micro_batches, " micro-batches"));
  }
  const std::int64_t samples = m.batch() / micro_batches;
  ModelCost cost;
  for (int l = 0; l + 1 < m.layer_sizes_size(); ++l) {
    const std::int64_t in = m.layer_sizes(l), out = m.layer_sizes(l + 1);
    cost.layers.push_back({absl::StrCat("linear ", l), in * out + out,
                           {{"matmul", 2.0 * static_cast<double>(samples * in * out), false}},
                           samples * out});
  }
  return cost;
}

}  // namespace

absl::StatusOr<ModelCost> CostOfModel(const proto::Workload& workload) {
  const std::uint32_t micro_batches = std::max(1u, workload.strategy().micro_batches());
  absl::StatusOr<ModelCost> cost =
      workload.has_transformer()   ? TransformerCost(workload.transformer())
      : workload.has_mlp()         ? MlpCost(workload.mlp(), micro_batches)
                                   : absl::InvalidArgumentError("the workload names no model");
  if (!cost.ok()) return cost;
  for (const LayerCost& layer : cost->layers) cost->parameters += layer.parameters;
  return cost;
}

absl::StatusOr<proto::Workload> PresetModel(std::string_view name) {
  struct Preset {
    std::string_view name;
    std::uint32_t layers, hidden, sequence, vocabulary;
  };
  // GPT-2's sizes (Radford et al. 2019), GPT-3's (Brown et al. 2020, table 2.1)
  // and Megatron-LM's 8.3B (Shoeybi et al. 2019, table 1).
  constexpr std::array<Preset, 5> kPresets = {{
      {"gpt2", 12, 768, 1024, 50257},
      {"gpt2-xl", 48, 1600, 1024, 50257},
      {"gpt3-2.7b", 32, 2560, 2048, 50257},
      {"gpt3-6.7b", 32, 4096, 2048, 50257},
      {"megatron-8.3b", 72, 3072, 1024, 51200},
  }};
  proto::Workload workload;
  workload.set_dtype(proto::Dtype::float16);
  if (name == "mlp") {
    // testbed train's defaults (proto/training.proto): 784 inputs, one hidden
    // layer of 128, 10 classes, 64 samples per worker.
    for (std::uint32_t size : {784u, 128u, 10u}) workload.mutable_mlp()->add_layer_sizes(size);
    workload.mutable_mlp()->set_batch(64);
    workload.set_dtype(proto::Dtype::float32);
    return workload;
  }
  for (const Preset& p : kPresets) {
    if (p.name != name) continue;
    proto::TransformerModel& t = *workload.mutable_transformer();
    t.set_layers(p.layers);
    t.set_hidden(p.hidden);
    t.set_sequence(p.sequence);
    t.set_micro_batch(1);
    t.set_vocabulary(p.vocabulary);
    return workload;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown model '", std::string(name),
                                                 "' (choose from ", PresetModelNames(), ")"));
}

std::string PresetModelNames() {
  return "gpt2, gpt2-xl, gpt3-2.7b, gpt3-6.7b, megatron-8.3b, mlp";
}

}  // namespace testbed
