#include "experiments/cli/workload_flags.h"

#include "absl/strings/str_cat.h"
#include "common/byte_size.h"
#include "experiments/cli/setting_flags.h"
#include "experiments/cli/spec_file.h"
#include "experiments/workload/model_cost.h"
#include "experiments/workload/parallel_layout.h"

namespace testbed {
namespace {

// An option that stores a positive count into `set` (a proto setter).
template <typename Set>
void AddCount(CLI::App& cmd, const std::string& names, const std::string& help, int most,
              Set set) {
  cmd.add_option_function<std::uint32_t>(names, set, help)->check(CLI::Range(1, most));
}

}  // namespace

void AddWorkloadFlags(CLI::App& cmd, WorkloadFlags& f) {
  CLI::Option* model =
      cmd.add_option("--model", f.model,
                     "A model of known size: " + PresetModelNames() +
                         " (mlp: testbed train's network)")
          ->capture_default_str();
  cmd.add_option("--workload", f.file,
                 "The model and strategy in protobuf text format (proto/workload.proto; "
                 "experiments/workloads/*.textproto); the flags below override its fields")
      ->check(CLI::ExistingFile)
      ->excludes(model);
  proto::TransformerModel& t = f.sizes;
  AddCount(cmd, "--layers", "Transformer layers L", 1 << 20,
           [&t](std::uint32_t v) { t.set_layers(v); });
  AddCount(cmd, "--hidden", "Transformer hidden size h", 1 << 20,
           [&t](std::uint32_t v) { t.set_hidden(v); });
  AddCount(cmd, "--sequence", "Tokens per sample s", 1 << 20,
           [&t](std::uint32_t v) { t.set_sequence(v); });
  AddCount(cmd, "--micro-batch", "Samples per micro-batch b", 1 << 20,
           [&t](std::uint32_t v) { t.set_micro_batch(v); });
  AddCount(cmd, "--vocabulary", "Vocabulary size V", 1 << 20,
           [&t](std::uint32_t v) { t.set_vocabulary(v); });
  cmd.add_option("--mlp-hidden", f.mlp_hidden,
                 "The MLP's hidden layer widths, comma-separated (--model mlp; default 128)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  AddCount(cmd, "--batch", "The MLP's samples per step on each data-parallel rank (default 64)",
           1 << 20, [&f](std::uint32_t v) { f.batch = v; });
  proto::ParallelStrategy& s = f.strategy;
  AddCount(cmd, "--tp", "Tensor-parallel degree t (ranks t consecutive, so packed in a rack)",
           1 << 13, [&s](std::uint32_t v) { s.set_tensor_parallel(v); });
  AddCount(cmd, "--pp", "Pipeline stages p", 1 << 13,
           [&s](std::uint32_t v) { s.set_pipeline_parallel(v); });
  AddCount(cmd, "--dp", "Data-parallel degree d; N = t x p x d ranks", 1 << 13,
           [&s](std::uint32_t v) { s.set_data_parallel(v); });
  AddCount(cmd, "--micro-batches", "Micro-batches m per step", kMaxMicroBatches,
           [&s](std::uint32_t v) { s.set_micro_batches(v); });
  f.schedule_option = AddEnumFlag(cmd, "--schedule", f.schedule,
                                  "The pipeline's order: one-f-one-b (1F1B) or gpipe");
  cmd.add_option_function<std::uint32_t>(
         "--zero", [&f](std::uint32_t v) { f.zero_stage = v; },
         "ZeRO stage: 0 (DDP), 1 (optimizer state sharded), 2 (and gradients), 3 (and "
         "weights: FSDP)")
      ->check(CLI::Range(0, 3));
  AddParsedOption(cmd, "--bucket", "DDP's gradient bucket (default 25MiB, PyTorch's)", "SIZE",
                  [&s](const std::string& text) -> std::string {
                    absl::StatusOr<std::int64_t> bytes = ParseByteSize(text);
                    if (!bytes.ok()) return std::string(bytes.status().message());
                    if (*bytes < 8) return "a bucket holds at least 8 bytes";
                    s.set_bucket_bytes(static_cast<std::uint64_t>(*bytes));
                    return "";
                  });
  f.dtype_option = AddEnumFlag(cmd, "-t,--dtype", f.dtype,
                               "Element type of gradients, weights and activations on the wire "
                               "(default: the model's; float16 for the transformers)");
}

absl::StatusOr<proto::Workload> BuildWorkload(const WorkloadFlags& f) {
  proto::Workload w;
  if (!f.file.empty()) {
    if (absl::Status st = ReadSpecFileInto(f.file, w, "workload"); !st.ok()) return st;
  } else {
    absl::StatusOr<proto::Workload> preset = PresetModel(f.model);
    if (!preset.ok()) return preset.status();
    w = *std::move(preset);
  }
  const bool sizes_given = f.sizes.ByteSizeLong() > 0;
  if (sizes_given && !w.has_transformer()) {
    return absl::InvalidArgumentError("--layers, --hidden, ... size a transformer, not an MLP");
  }
  if (sizes_given) w.mutable_transformer()->MergeFrom(f.sizes);
  if ((!f.mlp_hidden.empty() || f.batch != 0) && !w.has_mlp()) {
    return absl::InvalidArgumentError("--mlp-hidden and --batch size the MLP (--model mlp)");
  }
  if (!f.mlp_hidden.empty()) {
    proto::MlpModel& mlp = *w.mutable_mlp();
    const std::uint32_t inputs = mlp.layer_sizes(0);
    const std::uint32_t classes = mlp.layer_sizes(mlp.layer_sizes_size() - 1);
    mlp.clear_layer_sizes();
    mlp.add_layer_sizes(inputs);
    for (std::uint32_t width : f.mlp_hidden) mlp.add_layer_sizes(width);
    mlp.add_layer_sizes(classes);
  }
  if (f.batch != 0) w.mutable_mlp()->set_batch(f.batch);
  w.mutable_strategy()->MergeFrom(f.strategy);
  if (f.zero_stage) w.mutable_strategy()->set_zero_stage(*f.zero_stage);
  if (f.schedule_option->count() > 0) w.mutable_strategy()->set_pipeline_schedule(f.schedule);
  if (f.dtype_option->count() > 0) w.set_dtype(f.dtype);
  return w;
}

}  // namespace testbed
