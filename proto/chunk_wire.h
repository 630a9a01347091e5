// Payload chunks (PushChunk, ValueChunk) on the wire, built and read without
// passing their payload through a protobuf `bytes` field.
//
// Through generated code a 1 MiB chunk is copied four times in user space:
// into the `bytes` field, serialized into gRPC's slices, parsed out of them
// into a new string on the other side, and out of that string to where it is
// used. Here a chunk is a grpc::ByteBuffer in exactly the message's wire format
// (so generated stubs and these functions talk to each other): the small
// header fields are encoded by protobuf, the payload field is written as its
// tag and length followed by the caller's slices, and reading hands back the
// payload as sub-slices of what the transport received, with no copy.
//
// Thread-safety: free functions over values; no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "absl/status/status.h"

namespace testbed {

// The field numbers of the payloads in parameter_server.proto.
inline constexpr int kPushChunkPayloadField = 5;   // PushChunk.data
inline constexpr int kValueChunkPayloadField = 2;  // ValueChunk.data

// One message: `header` (whose payload field must be empty) followed by field
// `payload_field` holding the concatenation of `payload`. The slices are
// referenced, not copied.
grpc::ByteBuffer EncodeChunk(const google::protobuf::MessageLite& header, int payload_field,
                             std::span<const grpc::Slice> payload);

// A decoded chunk's payload: slices that share the received message's memory.
struct ChunkPayload {
  std::vector<grpc::Slice> slices;
  std::size_t bytes = 0;
};

// Parses `message` into `header` (every field but the payload) and `payload`.
// Accepts any valid encoding of the message, fields in any order; a repeated
// payload field keeps the last one, as protobuf does.
absl::Status DecodeChunk(const grpc::ByteBuffer& message, int payload_field,
                         google::protobuf::MessageLite* header, ChunkPayload* payload);

// TensorSpec.FP16 push encoding: IEEE half (binary16), round to nearest,
// ties to even; infinities stay infinities, NaN becomes the quiet NaN 0x7e00.
// Bit for bit Eigen::half's conversions (its portable path, the one built
// here: the same algorithm, F. Giesen's), so a gradient sent as halves and
// widened by the shard is the float Eigen's rounding gives
// (worker/train/compression.h), and the tests check it.
std::uint16_t FloatToHalf(float value);
float HalfToFloat(std::uint16_t half);  // exact: every half is a float

// out[2i], out[2i+1] = values[i] as a little-endian half; out holds 2 * n bytes.
void EncodeHalves(std::span<const float> values, std::byte* out);
// out[i] = the i-th little-endian half of the concatenated `slices` (a half
// may straddle two slices); their bytes must be even, and out holds bytes / 2.
void WidenHalves(std::span<const grpc::Slice> slices, float* out);

// TensorSpec.SPARSE push encoding: (uint32 index, float32 value) pairs,
// little-endian, 8 bytes each.
inline constexpr std::size_t kSparsePairBytes = 8;
// The most elements one SPARSE chunk may cover (16 MiB as float32): the
// shard allocates that much for it before a pair is read.
inline constexpr std::int64_t kMaxSparseChunkElements = std::int64_t{1} << 22;

// Appends to `out` a pair for each element of `values` that is not +0.0,
// indices from 0, ascending. values.size() must fit a uint32.
void EncodeNonZeros(std::span<const float> values, std::vector<std::byte>* out);
// Scatters the pairs of the concatenated `slices` (`bytes` in all) into
// `out`, which the caller zeroed; INVALID_ARGUMENT unless they are whole
// pairs with ascending indices inside `out`.
absl::Status ScatterPairs(std::span<const grpc::Slice> slices, std::size_t bytes,
                          std::span<float> out);

}  // namespace testbed
