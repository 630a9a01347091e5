// Payload chunks in the parameter server's wire format: what EncodeChunk
// builds parses as the generated message, what the generated message
// serializes to decodes to the same fields, and a payload split across slices
// anywhere (as a transport delivers it) comes back whole and uncopied.
#include "proto/chunk_wire.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

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

// The FP16 push encoding's conversions are IEEE 754 binary16, rounding to
// nearest even (they are Eigen::half's, as --compress fp16 uses elsewhere):
// checked against values worked out from the format, not against Eigen.
TEST(ChunkWireHalves, RoundToNearestEvenAndWidenExactly) {
  const float ulp_at_one = std::ldexp(1.0f, -10);  // a half has 10 fraction bits
  const std::vector<std::pair<float, std::uint16_t>> cases = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {65504.0f, 0x7bff},                          // the largest half
      {65519.99f, 0x7bff},                         // below the midpoint to infinity
      {65520.0f, 0x7c00},                          // the midpoint: ties to even, infinity
      {std::numeric_limits<float>::infinity(), 0x7c00},
      {1.0f + ulp_at_one / 2, 0x3c00},             // a tie: to the even neighbour, 1
      {1.0f + 3 * ulp_at_one / 2, 0x3c02},         // a tie: to the even neighbour, 1 + 2 ulp
      {std::nextafter(1.0f + ulp_at_one / 2, 2.0f), 0x3c01},  // just past the tie: up
      {std::ldexp(1.0f, -14), 0x0400},             // the smallest normal half
      {std::ldexp(1.0f, -24), 0x0001},             // the smallest subnormal half
      {std::ldexp(1.0f, -25), 0x0000},             // its half: a tie, to even (zero)
      {std::ldexp(1.5f, -25), 0x0001},             // past the tie: up
      {std::numeric_limits<float>::denorm_min(), 0x0000},
  };
  for (const auto& [value, bits] : cases) {
    EXPECT_EQ(FloatToHalf(value), bits) << value;
  }
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::quiet_NaN()) & 0x7c00, 0x7c00);
  EXPECT_NE(FloatToHalf(std::numeric_limits<float>::quiet_NaN()) & 0x03ff, 0);
  // Every finite half widens to a float that rounds back to it, and the
  // widening keeps order: each is exactly representable in a float.
  float previous = -std::numeric_limits<float>::infinity();
  for (std::uint32_t h = 0xfbff;; --h) {  // from -65504 up to -0 ...
    const float wide = HalfToFloat(static_cast<std::uint16_t>(h));
    EXPECT_EQ(FloatToHalf(wide), h);
    EXPECT_GE(wide, previous);
    previous = wide;
    if (h == 0x8000) break;
  }
  for (std::uint32_t h = 0x0000; h <= 0x7bff; ++h) {  // ... and from +0 to 65504
    const float wide = HalfToFloat(static_cast<std::uint16_t>(h));
    EXPECT_EQ(FloatToHalf(wide), h);
    EXPECT_GE(wide, previous);
    previous = wide;
  }
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);  // 1365/4096
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
}

// Halves split across slices anywhere (a transport delivers them so) widen
// to the values encoded.
TEST(ChunkWireHalves, WidenAcrossAnySliceBoundary) {
  const std::vector<float> values = {1.0f, -2.5f, 1.0f / 3, 65504.0f, 0.0f, -0.0f, 7.0f};
  std::string bytes(2 * values.size(), '\0');
  EncodeHalves(values, reinterpret_cast<std::byte*>(bytes.data()));
  for (std::size_t cut1 = 0; cut1 <= bytes.size(); ++cut1) {
    for (std::size_t cut2 = cut1; cut2 <= bytes.size(); ++cut2) {
      const std::vector<grpc::Slice> slices = {grpc::Slice(bytes.substr(0, cut1)),
                                               grpc::Slice(bytes.substr(cut1, cut2 - cut1)),
                                               grpc::Slice(bytes.substr(cut2))};
      std::vector<float> out(values.size(), -1.0f);
      WidenHalves(slices, out.data());
      for (std::size_t i = 0; i < values.size(); ++i) {
        ASSERT_EQ(out[i], HalfToFloat(FloatToHalf(values[i])))
            << "element " << i << ", cuts " << cut1 << " " << cut2;
      }
    }
  }
}

// SPARSE pairs: the non-zeros (not -0.0's sign lost, not +0.0 sent) come
// back in place whatever the slice boundaries; bad pairs are refused.
TEST(ChunkWireSparse, PairsScatterBackAcrossAnySliceBoundaryAndBadOnesAreRefused) {
  const std::vector<float> values = {0.0f, 3.5f, 0.0f, 0.0f, -0.0f, -1.25f, 0.0f, 9.0f};
  std::vector<std::byte> wire;
  EncodeNonZeros(values, &wire);
  ASSERT_EQ(wire.size(), 4 * kSparsePairBytes) << "3.5, -0.0, -1.25 and 9";
  const std::string bytes(reinterpret_cast<const char*>(wire.data()), wire.size());
  for (std::size_t cut = 0; cut <= bytes.size(); ++cut) {
    const std::vector<grpc::Slice> slices = {grpc::Slice(bytes.substr(0, cut)),
                                             grpc::Slice(bytes.substr(cut))};
    std::vector<float> out(values.size(), 0.0f);
    ASSERT_TRUE(ScatterPairs(slices, bytes.size(), out).ok());
    for (std::size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(values[i]))
          << "element " << i << ", cut " << cut;
    }
  }
  std::vector<float> out(values.size(), 0.0f);
  const std::vector<grpc::Slice> whole = {grpc::Slice(bytes)};
  EXPECT_FALSE(ScatterPairs(whole, bytes.size(), std::span(out).first(7)).ok())
      << "index 7 outside 7 elements";
  const std::vector<grpc::Slice> torn = {grpc::Slice(bytes.substr(0, 12))};
  EXPECT_FALSE(ScatterPairs(torn, 12, out).ok()) << "a pair and a half";
  const std::vector<grpc::Slice> backwards = {grpc::Slice(bytes.substr(8, 8) + bytes.substr(0, 8))};
  EXPECT_FALSE(ScatterPairs(backwards, 16, out).ok()) << "indices not ascending";
}

}  // namespace
}  // namespace testbed
