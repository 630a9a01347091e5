// Gradient compression (--compress none|fp16|topk:RATIO), the pieces every
// GradientSync shares:
//   fp16  IEEE half precision (Eigen::half: round to nearest, ties to even):
//         ToHalf packs a gradient for the wire, FromHalf widens what came
//         back. An all-reduce sums the halves as halves, inside its
//         collective (DataType::kFloat16); the parameter server widens each
//         push into its float32 sum.
//   topk  the RATIO fraction of elements largest in magnitude, with error
//         feedback (Seide et al. 2014, Stich et al. 2018): what a step does
//         not send stays in a residual kept per worker and is added to the
//         next step's gradient, so no gradient mass is ever lost, only late.
// How a sync puts these on the wire is the sync's business (allreduce_sync.h,
// ps_sync.h), since it depends on what the far side can take.
//
// Thread-safety: the functions are pure; an ErrorFeedbackTopK belongs to one
// worker (one per bucket) and is used from one thread at a time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/training.pb.h"

namespace testbed {

struct CompressionConfig {
  enum class Kind { kNone, kFp16, kTopK };
  Kind kind = Kind::kNone;
  double ratio = 1.0;  // top-k: the fraction of elements sent, in (0, 1]

  bool none() const { return kind == Kind::kNone; }
  // As --compress takes it: "none", "fp16", "topk:0.01".
  std::string Name() const;
};

// "none", "fp16" or "topk:RATIO" with 0 < RATIO <= 1; anything else is
// INVALID_ARGUMENT naming the value and the choices.
absl::StatusOr<CompressionConfig> ParseCompression(std::string_view text);
// A spec's compression (proto/training.proto) as the trainer takes it; a
// top-k ratio outside (0, 1] is refused as ParseCompression refuses it.
absl::StatusOr<CompressionConfig> CompressionOf(const proto::Compression& compression);
proto::Compression ToProto(const CompressionConfig& config);

// out[i] = values[i] as IEEE half (bits); out.size() == values.size().
void ToHalf(std::span<const float> values, std::span<std::uint16_t> out);
// out[i] = halves[i] as float (exact); halves.size() == out.size().
void FromHalf(std::span<const std::uint16_t> halves, std::span<float> out);
// values[i] = values[i] rounded to the nearest half (what ToHalf sends).
void RoundThroughHalf(std::span<float> values);

// How many of `elements` top-k sends: ceil(ratio * elements), at least one
// (none of none).
std::int64_t TopKCount(std::int64_t elements, double ratio);

class ErrorFeedbackTopK {
 public:
  // For a gradient (or bucket) of `elements` floats; the residual starts at 0.
  ErrorFeedbackTopK(std::int64_t elements, double ratio);

  std::int64_t k() const { return k_; }

  // accumulated = gradient + residual. Writes the k elements of accumulated
  // largest in magnitude (ties: the lower index) to indices and values, by
  // ascending index, and keeps the others as the residual: sent + residual
  // == accumulated, exactly (each element is either sent or kept, never
  // split). indices.size() == values.size() == k().
  void Select(std::span<const float> gradient, std::span<std::uint32_t> indices,
              std::span<float> values);

  std::span<const float> residual() const { return residual_; }

 private:
  const std::int64_t k_;
  std::vector<float> residual_;        // after Select: accumulated - sent
  std::vector<std::uint32_t> order_;   // scratch: element indices
};

}  // namespace testbed
