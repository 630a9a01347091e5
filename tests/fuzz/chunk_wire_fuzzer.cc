// The parameter server's chunk parser (DecodeChunk) on any bytes a peer can
// send. The first two bytes choose where the message is cut into 1-3 slices
// (a transport delivers a message in pieces anywhere); the rest is the message,
// decoded as a PushChunk (payload field 5) and as a ValueChunk (field 2).
// Invariants: a decoded payload's size is the sum of its slices and no more than
// the message; encoding what was decoded and decoding it again gives the same
// header and payload. A PushChunk's payload is also decoded as the push
// encodings would (halves widened, pairs scattered into PushChunk.count
// elements, capped): never a write outside the chunk, and accepted pairs
// encode back to no more bytes than came.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "proto/chunk_wire.h"
#include "proto/parameter_server.pb.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

std::string Joined(const testbed::ChunkPayload& payload) {
  std::string out;
  for (const grpc::Slice& s : payload.slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

template <typename Header>
void DecodeAs(const grpc::ByteBuffer& message, std::size_t message_bytes, int payload_field) {
  Header header;
  testbed::ChunkPayload payload;
  if (!testbed::DecodeChunk(message, payload_field, &header, &payload).ok()) return;
  std::size_t sum = 0;
  for (const grpc::Slice& s : payload.slices) sum += s.size();
  FUZZ_CHECK(sum == payload.bytes);
  FUZZ_CHECK(payload.bytes <= message_bytes);

  // What the server would send back, built from what it read, reads the same.
  const grpc::ByteBuffer again =
      testbed::EncodeChunk(header, payload_field, payload.slices);
  Header header2;
  testbed::ChunkPayload payload2;
  FUZZ_CHECK(testbed::DecodeChunk(again, payload_field, &header2, &payload2).ok());
  FUZZ_CHECK(header2.SerializeAsString() == header.SerializeAsString());
  FUZZ_CHECK(Joined(payload2) == Joined(payload));

  if constexpr (std::is_same_v<Header, testbed::proto::PushChunk>) {
    if (payload.bytes % 2 == 0) {
      std::vector<float> widened(payload.bytes / 2);
      testbed::WidenHalves(payload.slices, widened.data());
    }
    const std::int64_t count = std::clamp<std::int64_t>(header.count(), 0, 1 << 16);
    std::vector<float> dense(static_cast<std::size_t>(count), 0.0f);
    if (testbed::ScatterPairs(payload.slices, payload.bytes, dense).ok()) {
      std::vector<std::byte> pairs;
      testbed::EncodeNonZeros(dense, &pairs);
      FUZZ_CHECK(pairs.size() <= payload.bytes);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::size_t cut1 = 0, cut2 = 0;
  if (size >= 2) {
    const std::size_t n = size - 2;
    cut1 = data[0] * n / 255;
    cut2 = data[1] * n / 255;
    if (cut1 > cut2) std::swap(cut1, cut2);
    data += 2;
    size -= 2;
  }
  std::vector<grpc::Slice> slices;  // copies of the pieces, empty ones left out
  const std::size_t bounds[] = {0, cut1, cut2, size};
  for (int i = 0; i < 3; ++i) {
    if (bounds[i + 1] > bounds[i]) {
      slices.emplace_back(data + bounds[i], bounds[i + 1] - bounds[i]);
    }
  }
  const grpc::ByteBuffer message(slices.data(), slices.size());
  DecodeAs<testbed::proto::PushChunk>(message, size, testbed::kPushChunkPayloadField);
  DecodeAs<testbed::proto::ValueChunk>(message, size, testbed::kValueChunkPayloadField);
  return 0;
}
