// Payload chunks in the parameter server's wire format: what EncodeChunk
// builds parses as the generated message, what the generated message
// serializes to decodes to the same fields, and a payload split across slices
// anywhere (as a transport delivers it) comes back whole and uncopied.
#include "proto/chunk_wire.h"

#include <gtest/gtest.h>

#include <string>

#include "proto/parameter_server.pb.h"

namespace testbed {
namespace {

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

std::string Joined(const ChunkPayload& payload) {
  std::string out;
  for (const grpc::Slice& s : payload.slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

// `bytes` cut into slices of `piece` bytes (the last one shorter).
grpc::ByteBuffer Sliced(const std::string& bytes, std::size_t piece) {
  std::vector<grpc::Slice> slices;
  for (std::size_t at = 0; at < bytes.size(); at += piece) {
    slices.emplace_back(bytes.data() + at, std::min(piece, bytes.size() - at));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

TEST(ChunkWire, EncodedChunkParsesAsTheGeneratedMessage) {
  proto::PushChunk header;
  header.set_tensor("t");
  header.set_worker(3);
  header.set_step(7);
  header.set_offset(1 << 20);
  const grpc::Slice parts[] = {grpc::Slice(std::string("abc")), grpc::Slice(std::string("defgh"))};
  const grpc::ByteBuffer message = EncodeChunk(header, kPushChunkPayloadField, parts);

  proto::PushChunk parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(message)));
  EXPECT_EQ(parsed.tensor(), "t");
  EXPECT_EQ(parsed.worker(), 3u);
  EXPECT_EQ(parsed.step(), 7u);
  EXPECT_EQ(parsed.offset(), 1 << 20);
  EXPECT_EQ(parsed.data(), "abcdefgh");
}

TEST(ChunkWire, GeneratedMessageDecodesWhateverTheSliceBoundaries) {
  proto::ValueChunk original;
  original.set_offset(123456789);
  std::string payload(100000, '\0');
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7);
  original.set_data(payload);
  const std::string wire = original.SerializeAsString();
  for (const std::size_t piece : {std::size_t{1}, std::size_t{3}, std::size_t{4096}, wire.size()}) {
    proto::ValueChunk header;
    ChunkPayload decoded;
    ASSERT_TRUE(DecodeChunk(Sliced(wire, piece), kValueChunkPayloadField, &header, &decoded).ok())
        << piece;
    EXPECT_EQ(header.offset(), 123456789);
    EXPECT_TRUE(header.data().empty());
    EXPECT_EQ(decoded.bytes, payload.size());
    EXPECT_EQ(Joined(decoded), payload) << piece;
  }
}

TEST(ChunkWire, EmptyMessageAndEmptyPayloadDecode) {
  proto::PushChunk header;
  ChunkPayload payload;
  ASSERT_TRUE(DecodeChunk(grpc::ByteBuffer(), kPushChunkPayloadField, &header, &payload).ok());
  EXPECT_EQ(payload.bytes, 0u);
  header.set_step(2);
  const grpc::ByteBuffer message = EncodeChunk(header, kPushChunkPayloadField, {});
  proto::PushChunk parsed;
  ASSERT_TRUE(DecodeChunk(message, kPushChunkPayloadField, &parsed, &payload).ok());
  EXPECT_EQ(parsed.step(), 2u);
  EXPECT_EQ(payload.bytes, 0u);
}

TEST(ChunkWire, TruncatedMessageIsRefused) {
  proto::ValueChunk original;
  original.set_offset(5);
  original.set_data(std::string(64, 'x'));
  std::string wire = original.SerializeAsString();
  wire.resize(wire.size() - 1);  // the payload's length now runs past the end
  proto::ValueChunk header;
  ChunkPayload payload;
  const absl::Status st = DecodeChunk(Sliced(wire, 16), kValueChunkPayloadField, &header, &payload);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
}

}  // namespace
}  // namespace testbed
