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

}  // namespace testbed
