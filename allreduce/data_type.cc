#include "allreduce/data_type.h"

#include <cstring>

#include "allreduce/reduce_functors.h"

namespace testbed {
namespace {

template <typename T, typename Combine>
void ReduceTyped(std::byte* dst, const std::byte* src, std::int64_t count, Combine combine) {
  // Buffers arrive as bytes, but every range starts at an element boundary of
  // a buffer allocated for the element type, so these casts are aligned.
  T* out = reinterpret_cast<T*>(dst);
  const T* in = reinterpret_cast<const T*>(src);
  for (std::int64_t i = 0; i < count; ++i) out[i] = combine(out[i], in[i]);
}

template <typename T>
void ReduceWithOp(ReduceOp op, std::byte* dst, const std::byte* src, std::int64_t count) {
  switch (op) {
    case ReduceOp::kSum: return ReduceTyped<T>(dst, src, count, reduce::Sum());
    case ReduceOp::kMin: return ReduceTyped<T>(dst, src, count, reduce::Min());
    case ReduceOp::kMax: return ReduceTyped<T>(dst, src, count, reduce::Max());
  }
}

}  // namespace

std::size_t ElementSize(DataType type) {
  switch (type) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kInt32: return 4;
  }
  return 0;
}

std::string_view Name(DataType type) {
  switch (type) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kInt32: return "int32";
  }
  return "?";
}

std::string_view Name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
  }
  return "?";
}

std::optional<DataType> ParseDataType(std::string_view name) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32}) {
    if (Name(t) == name) return t;
  }
  return std::nullopt;
}

std::optional<ReduceOp> ParseReduceOp(std::string_view name) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax}) {
    if (Name(op) == name) return op;
  }
  return std::nullopt;
}

double LoadElement(DataType type, const std::byte* buffer, std::int64_t index) {
  const std::byte* at = buffer + index * ElementSize(type);
  switch (type) {
    case DataType::kFloat32: { float v; std::memcpy(&v, at, sizeof v); return v; }
    case DataType::kFloat64: { double v; std::memcpy(&v, at, sizeof v); return v; }
    case DataType::kInt32: { std::int32_t v; std::memcpy(&v, at, sizeof v); return v; }
  }
  return 0;
}

void StoreElement(DataType type, std::byte* buffer, std::int64_t index, double value) {
  std::byte* at = buffer + index * ElementSize(type);
  switch (type) {
    case DataType::kFloat32: { const float v = static_cast<float>(value); std::memcpy(at, &v, sizeof v); return; }
    case DataType::kFloat64: { std::memcpy(at, &value, sizeof value); return; }
    case DataType::kInt32: { const auto v = static_cast<std::int32_t>(value); std::memcpy(at, &v, sizeof v); return; }
  }
}

void ReduceInto(DataType type, ReduceOp op, std::byte* dst, const std::byte* src,
                std::int64_t count) {
  switch (type) {
    case DataType::kFloat32: return ReduceWithOp<float>(op, dst, src, count);
    case DataType::kFloat64: return ReduceWithOp<double>(op, dst, src, count);
    case DataType::kInt32: return ReduceWithOp<std::int32_t>(op, dst, src, count);
  }
}

}  // namespace testbed
