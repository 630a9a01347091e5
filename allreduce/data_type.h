// Element types and reduction operators the collectives run over, and the one
// place that turns (type, operator) into a loop over memory.
//
// float16 is IEEE 754 binary16 in 2 bytes. It is reduced as NCCL reduces
// half: both operands widened to float, combined by the float functor
// (reduce_functors.h), the result rounded back to half to nearest, ties to
// even - once per reduction, so a ring rounds at every hop. (A float keeps
// 24 bits, at least 2·11 + 2, so the float sum of two halves rounded to half
// is the correctly rounded half sum: rounding twice costs nothing.) A NaN
// result becomes 0x7fff, the NaN CUDA's __float2half_rn gives, so the
// host loop and the CUDA kernel agree bit for bit.
//
// Thread-safety: everything here is a pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace testbed {

enum class DataType { kFloat32, kFloat64, kInt32, kFloat16 };
enum class ReduceOp { kSum, kMin, kMax };

std::size_t ElementSize(DataType type);
std::string_view Name(DataType type);
std::string_view Name(ReduceOp op);
std::optional<DataType> ParseDataType(std::string_view name);
std::optional<ReduceOp> ParseReduceOp(std::string_view name);
// "float32, float64, int32, float16": for messages that list the choices.
std::string DataTypeNames();

// Element `index` of a buffer of `type`, converted to and from double (exact
// for every int32, float32 and float16, and for float64 itself). Storing a
// float16 rounds the double to float first, then to half (to nearest, ties
// to even): correctly rounded for every value that is a float. For tests,
// traces and the harness's correctness check - not for hot loops.
double LoadElement(DataType type, const std::byte* buffer, std::int64_t index);
void StoreElement(DataType type, std::byte* buffer, std::int64_t index, double value);

// dst[i] = op(dst[i], src[i]) for i in [0, count). dst and src may not overlap.
void ReduceInto(DataType type, ReduceOp op, std::byte* dst, const std::byte* src,
                std::int64_t count);

}  // namespace testbed
