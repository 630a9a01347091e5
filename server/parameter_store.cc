// The parameter-server shard's register of tensors: a declaration checked
// (its own rules, then the shard's limits on bytes and tensors) and its
// tensor made, found by name, forgotten; and the store's shutdown. How the
// tensors' steps run is in server/parameter_store_push_pull.cc and
// server/parameter_store_values.cc.
#include "server/parameter_store.h"

#include <unistd.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "allreduce/chunking.h"
#include "common/byte_size.h"
#include "common/optimizer.h"
#include "proto/spec.h"
#include "server/parameter_store_tensor.h"

namespace testbed {

namespace {

bool SameDeclaration(const proto::TensorSpec& a, const proto::TensorSpec& b) {
  return a.SerializeAsString() == b.SerializeAsString();
}

// The declaration's own rules, before the shard's limits are looked at: the
// error of the first one it breaks, else the tensor's optimizer.
absl::StatusOr<std::unique_ptr<Optimizer>> CheckDeclaration(const proto::TensorSpec& spec,
                                                             int shards, int shard) {
  if (spec.name().empty()) return absl::InvalidArgumentError("a tensor needs a name");
  if (!proto::Dtype::Kind_IsValid(spec.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", spec.name(), "': unknown dtype ", spec.dtype()));
  }
  const DataType type = DataTypeOf(spec.dtype());
  // Halves are a wire format here, not a storage type: the optimizers work
  // in float32 or float64, and a gradient travels as halves through a float32
  // tensor's FP16 push encoding.
  if (type == DataType::kFloat16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", spec.name(),
        "': the parameter server holds float32, float64 or int32 tensors, not float16 "
        "(push a float32 tensor's gradients as halves with push encoding FP16)"));
  }
  if (spec.count() < 0 || spec.workers() < 1 || shards < 1 || shard < 0 || shard >= shards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad declaration of '", spec.name(), "': count ", spec.count(), ", workers ",
        spec.workers(), ", shard ", shard, " of ", shards));
  }
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(spec.optimizer());
  if (!optimizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", spec.name(), "': ", optimizer.status().message()));
  }
  if (type == DataType::kInt32 && (*optimizer)->Updates()) {
    return absl::InvalidArgumentError("int32 tensors only aggregate (optimizer NONE)");
  }
  const proto::TensorSpec::PushEncoding encoding = spec.push_encoding();
  if (!proto::TensorSpec::PushEncoding_IsValid(encoding)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", spec.name(),
                                                   "': unknown push encoding ", encoding,
                                                   " (DENSE, FP16 or SPARSE)"));
  }
  if (encoding != proto::TensorSpec::DENSE && type != DataType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", spec.name(), "': the ", proto::TensorSpec::PushEncoding_Name(encoding),
        " push encoding is for float32 tensors, not ", std::string(Name(type))));
  }
  const proto::TensorSpec::Consistency consistency = spec.consistency();
  if (!proto::TensorSpec::Consistency_IsValid(consistency)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", spec.name(), "': unknown consistency ", consistency));
  }
  if (spec.staleness() != 0 && consistency != proto::TensorSpec::BOUNDED_STALENESS) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", spec.name(), "': a staleness bound (", spec.staleness(),
        ") needs consistency BOUNDED_STALENESS, not ",
        proto::TensorSpec::Consistency_Name(consistency)));
  }
  const bool stale = consistency != proto::TensorSpec::SYNCHRONOUS;
  if (stale && !(*optimizer)->Updates()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", spec.name(), "': consistency ",
        proto::TensorSpec::Consistency_Name(consistency),
        " needs an optimizer that updates (sgd, momentum, adam): NONE serves one step's sum, "
        "which only synchronous steps have"));
  }
  return optimizer;
}

}  // namespace

std::int64_t DefaultMaxTensorBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::int64_t{8} << 30;
  return static_cast<std::int64_t>(pages) / 2 * page;
}

ParameterStore::~ParameterStore() { Shutdown(); }

void ParameterStore::Shutdown() {
  std::vector<std::shared_ptr<Tensor>> all;
  {
    std::lock_guard lock(mu_);
    shutdown_ = true;
    for (auto& [name, tensor] : tensors_) all.push_back(tensor);
  }
  for (auto& tensor : all) {
    std::lock_guard lock(tensor->mu);
    tensor->changed_cv.notify_all();
  }
}

absl::StatusOr<ParameterStore::Slice> ParameterStore::Declare(const proto::TensorSpec& spec,
                                                              int shards, int shard) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = CheckDeclaration(spec, shards, shard);
  if (!optimizer.ok()) return optimizer.status();
  const DataType type = DataTypeOf(spec.dtype());  // known: checked above
  // The slice is measured against the limit by division, so no count, however
  // large, overflows on the way; a whole tensor whose bytes do not fit 64 bits
  // is refused too (its byte offsets would overflow).
  const Chunk chunk = ChunkOf(spec.count(), shards, shard);
  const auto element = static_cast<std::int64_t>(ElementSize(type));
  const std::string elements = absl::StrCat(std::string(Name(type)), " elements");
  if (chunk.count > max_tensor_bytes_ / element) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tensor '", spec.name(), "': its slice of ", chunk.count, " ", elements, " (",
        HumanByteSize(static_cast<double>(chunk.count) * static_cast<double>(element)),
        ") exceeds this shard's limit of ", HumanByteSize(static_cast<double>(max_tensor_bytes_)),
        " per tensor (testbed-server --max-tensor-bytes)"));
  }
  if (spec.count() > std::numeric_limits<std::int64_t>::max() / element) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", spec.name(), "': ", spec.count(),
                                                   " ", elements,
                                                   " are more bytes than 64 bits can count"));
  }
  const std::int64_t slice_bytes = chunk.count * element;
  std::lock_guard lock(mu_);
  if (auto it = tensors_.find(spec.name()); it != tensors_.end()) {
    const Tensor& t = *it->second;
    if (!SameDeclaration(t.spec, spec) || t.shards != shards || t.shard != shard) {
      return absl::AlreadyExistsError(
          absl::StrCat(t.Name(), " is already declared differently on this shard"));
    }
    return t.slice;
  }
  if (static_cast<std::int64_t>(tensors_.size()) >= max_tensors_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("tensor '", spec.name(), "': this shard already holds ", tensors_.size(),
                     " tensors, its limit (testbed-server --max-tensors); forget some first"));
  }
  if (slice_bytes > max_total_bytes_ - declared_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tensor '", spec.name(), "': its slice of ", HumanByteSize(static_cast<double>(slice_bytes)),
        " with the ", HumanByteSize(static_cast<double>(declared_bytes_)),
        " already declared exceeds this shard's limit of ",
        HumanByteSize(static_cast<double>(max_total_bytes_)),
        " for all tensors (testbed-server --max-total-tensor-bytes)"));
  }
  auto t = Tensor::Make(spec, shards, shard, {chunk.offset, chunk.count}, type, chunk_bytes_,
                        *std::move(optimizer));
  tensors_[spec.name()] = t;
  declared_bytes_ += slice_bytes;
  return t->slice;
}

std::shared_ptr<ParameterStore::Tensor> ParameterStore::Tensor::Make(
    const proto::TensorSpec& spec, int shards, int shard, Slice slice, DataType type,
    std::size_t chunk_bytes, std::unique_ptr<Optimizer> optimizer) {
  const proto::TensorSpec::Consistency consistency = spec.consistency();
  const bool stale = consistency != proto::TensorSpec::SYNCHRONOUS;
  auto t = std::make_shared<Tensor>();
  t->spec = spec;
  t->shards = shards;
  t->shard = shard;
  t->slice = slice;
  t->type = type;
  t->element = ElementSize(type);
  t->joined.assign(spec.workers(), false);
  t->pushed.assign(spec.workers(), false);
  t->staged.assign(spec.workers(), 0);
  t->open.resize(spec.workers());
  t->gradients.resize(spec.workers());
  t->chunk_elements = std::max<std::size_t>(1, chunk_bytes / t->element);
  // Step 0 is served: all zeros, every chunk worked out. Its buffer and a
  // spare for step 1 are touched now, not during the first timed step.
  t->values = std::make_shared<Bytes>(t->bytes());
  if (optimizer->Updates() && !stale) {  // only sync optimizers start from it
    t->previous = std::make_shared<const Bytes>(t->bytes());
  }
  t->spares.push_back(std::make_shared<Bytes>(t->bytes()));
  const std::size_t chunks =
      (static_cast<std::size_t>(slice.count) + t->chunk_elements - 1) / t->chunk_elements;
  t->chunks.assign(chunks, ChunkState::kDone);
  t->optimizer = std::move(optimizer);
  t->optimizer->Prepare(slice.count);
  if (stale) {
    t->stale = true;
    t->staleness = consistency == proto::TensorSpec::ASYNCHRONOUS
                       ? std::numeric_limits<std::uint64_t>::max()
                       : spec.staleness();
    t->clock.assign(spec.workers(), 0);
    t->pushing.assign(spec.workers(), false);
  }
  return t;
}

void ParameterStore::Forget(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return;
  declared_bytes_ -= static_cast<std::int64_t>(it->second->bytes());
  tensors_.erase(it);
}

std::shared_ptr<ParameterStore::Tensor> ParameterStore::Find(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

}  // namespace testbed
