#include "allreduce/data_type.h"

#include <Eigen/Core>

#include <cmath>
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

// binary16 bits to and from float, through Eigen::half (round to nearest,
// ties to even); a NaN becomes CUDA's canonical 0x7fff (data_type.h).
float WidenHalf(std::uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
}

std::uint16_t RoundToHalf(float value) {
  if (std::isnan(value)) return 0x7fff;
  return Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(value));
}

// Halves travel as their bits; each is widened, combined in float and
// rounded back.
template <typename Combine>
void ReduceHalves(std::byte* dst, const std::byte* src, std::int64_t count, Combine combine) {
  auto* out = reinterpret_cast<std::uint16_t*>(dst);
  const auto* in = reinterpret_cast<const std::uint16_t*>(src);
  for (std::int64_t i = 0; i < count; ++i) {
    out[i] = RoundToHalf(combine(WidenHalf(out[i]), WidenHalf(in[i])));
  }
}

template <typename T>
void ReduceWithOp(ReduceOp op, std::byte* dst, const std::byte* src, std::int64_t count) {
  switch (op) {
    case ReduceOp::kSum: return ReduceTyped<T>(dst, src, count, reduce::Sum());
    case ReduceOp::kMin: return ReduceTyped<T>(dst, src, count, reduce::Min());
    case ReduceOp::kMax: return ReduceTyped<T>(dst, src, count, reduce::Max());
  }
}

void ReduceHalvesWithOp(ReduceOp op, std::byte* dst, const std::byte* src,
                        std::int64_t count) {
  switch (op) {
    case ReduceOp::kSum: return ReduceHalves(dst, src, count, reduce::Sum());
    case ReduceOp::kMin: return ReduceHalves(dst, src, count, reduce::Min());
    case ReduceOp::kMax: return ReduceHalves(dst, src, count, reduce::Max());
  }
}

constexpr DataType kEveryDataType[] = {DataType::kFloat32, DataType::kFloat64, DataType::kInt32,
                                       DataType::kFloat16};

}  // namespace

std::size_t ElementSize(DataType type) {
  switch (type) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kInt32: return 4;
    case DataType::kFloat16: return 2;
  }
  return 0;
}

std::string_view Name(DataType type) {
  switch (type) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kInt32: return "int32";
    case DataType::kFloat16: return "float16";
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
  for (DataType t : kEveryDataType) {
    if (Name(t) == name) return t;
  }
  return std::nullopt;
}

std::string DataTypeNames() {
  std::string names;
  for (DataType t : kEveryDataType) {
    if (!names.empty()) names += ", ";
    names += Name(t);
  }
  return names;
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
    case DataType::kFloat16: {
      std::uint16_t v;
      std::memcpy(&v, at, sizeof v);
      return WidenHalf(v);
    }
  }
  return 0;
}

void StoreElement(DataType type, std::byte* buffer, std::int64_t index, double value) {
  std::byte* at = buffer + index * ElementSize(type);
  switch (type) {
    case DataType::kFloat32: { const float v = static_cast<float>(value); std::memcpy(at, &v, sizeof v); return; }
    case DataType::kFloat64: { std::memcpy(at, &value, sizeof value); return; }
    case DataType::kInt32: { const auto v = static_cast<std::int32_t>(value); std::memcpy(at, &v, sizeof v); return; }
    case DataType::kFloat16: {
      const std::uint16_t v = RoundToHalf(static_cast<float>(value));
      std::memcpy(at, &v, sizeof v);
      return;
    }
  }
}

void ReduceInto(DataType type, ReduceOp op, std::byte* dst, const std::byte* src,
                std::int64_t count) {
  switch (type) {
    case DataType::kFloat32: return ReduceWithOp<float>(op, dst, src, count);
    case DataType::kFloat64: return ReduceWithOp<double>(op, dst, src, count);
    case DataType::kInt32: return ReduceWithOp<std::int32_t>(op, dst, src, count);
    case DataType::kFloat16: return ReduceHalvesWithOp(op, dst, src, count);
  }
}

}  // namespace testbed
