// Writes the chunk_wire fuzz target's seed corpus with the real encoder:
// a PushChunk and a ValueChunk, each with a small payload in two slices. The
// first two bytes of each seed are the fuzz target's slice cut points.
// Run once by hand when the wire format changes:
//   build/tests/fuzz/make_chunk_seeds tests/fuzz/corpus/chunk_wire
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "proto/chunk_wire.h"
#include "proto/parameter_server.pb.h"

namespace {

void Write(const std::string& path, const grpc::ByteBuffer& message, char cut1, char cut2) {
  std::vector<grpc::Slice> slices;
  if (!message.Dump(&slices).ok()) return;
  std::ofstream out(path, std::ios::binary);
  out << cut1 << cut2;
  for (const grpc::Slice& s : slices) {
    out.write(reinterpret_cast<const char*>(s.begin()), static_cast<std::streamsize>(s.size()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const std::vector<grpc::Slice> payload = {grpc::Slice(std::string(16, '\x01')),
                                            grpc::Slice(std::string(8, '\x7f'))};
  testbed::proto::PushChunk push;
  push.set_tensor("w0");
  push.set_worker(1);
  push.set_step(3);
  push.set_offset(64);
  Write(dir + "/push_chunk", testbed::EncodeChunk(push, testbed::kPushChunkPayloadField, payload),
        '\x40', '\xc0');
  testbed::proto::ValueChunk value;
  value.set_offset(128);
  Write(dir + "/value_chunk", testbed::EncodeChunk(value, testbed::kValueChunkPayloadField, payload),
        '\x00', '\xff');
  testbed::proto::PushChunk later;  // a later chunk: only offset and payload
  later.set_offset(4096);
  Write(dir + "/push_chunk_later",
        testbed::EncodeChunk(later, testbed::kPushChunkPayloadField, payload), '\x10', '\x10');
  return 0;
}
