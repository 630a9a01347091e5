// Element types and reduction operators the collectives run over, and the one
// place that turns (type, operator) into a loop over memory.
//
// Thread-safety: everything here is a pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace testbed {

enum class DataType { kFloat32, kFloat64, kInt32 };
enum class ReduceOp { kSum, kMin, kMax };

std::size_t ElementSize(DataType type);
std::string_view Name(DataType type);
std::string_view Name(ReduceOp op);
std::optional<DataType> ParseDataType(std::string_view name);
std::optional<ReduceOp> ParseReduceOp(std::string_view name);

// Element `index` of a buffer of `type`, converted to and from double (exact
// for every int32 and float32, and for float64 itself). For tests, traces and
// the harness's correctness check - not for hot loops.
double LoadElement(DataType type, const std::byte* buffer, std::int64_t index);
void StoreElement(DataType type, std::byte* buffer, std::int64_t index, double value);

// dst[i] = op(dst[i], src[i]) for i in [0, count). dst and src may not overlap.
void ReduceInto(DataType type, ReduceOp op, std::byte* dst, const std::byte* src,
                std::int64_t count);

}  // namespace testbed
