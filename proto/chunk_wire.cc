#include "proto/chunk_wire.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

constexpr int kWireVarint = 0, kWireFixed64 = 1, kWireLengthDelimited = 2, kWireFixed32 = 5;

void AppendVarint(std::uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Reads through a message's slices; a field may straddle slices anywhere.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices) : slices_(slices) {
    for (const grpc::Slice& s : slices_) left_ += s.size();
    SkipExhausted();
  }

  std::size_t left() const { return left_; }

  bool ReadByte(std::uint8_t* byte) {
    if (left_ == 0) return false;
    *byte = slices_[index_].begin()[offset_];
    Advance(1);
    return true;
  }

  // Appends the next `n` bytes to `out` (a copy: only for small fields).
  bool CopyTo(std::size_t n, std::string* out) {
    if (n > left_) return false;
    while (n > 0) {
      const grpc::Slice& s = slices_[index_];
      const std::size_t take = std::min(n, s.size() - offset_);
      out->append(reinterpret_cast<const char*>(s.begin() + offset_), take);
      Advance(take);
      n -= take;
    }
    return true;
  }

  // Appends the next `n` bytes to `out` as sub-slices: references, no copy.
  bool SliceTo(std::size_t n, std::vector<grpc::Slice>* out) {
    if (n > left_) return false;
    while (n > 0) {
      const grpc::Slice& s = slices_[index_];
      const std::size_t take = std::min(n, s.size() - offset_);
      out->push_back(offset_ == 0 && take == s.size() ? s : s.sub(offset_, offset_ + take));
      Advance(take);
      n -= take;
    }
    return true;
  }

 private:
  void Advance(std::size_t n) {
    offset_ += n;
    left_ -= n;
    SkipExhausted();
  }
  void SkipExhausted() {
    while (index_ < slices_.size() && offset_ == slices_[index_].size()) {
      ++index_;
      offset_ = 0;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  std::size_t index_ = 0;   // the slice being read
  std::size_t offset_ = 0;  // into it
  std::size_t left_ = 0;    // bytes in this and the later slices
};

// Reads a varint, appending its raw bytes to `raw` (to re-emit it unchanged).
bool ReadVarint(SliceCursor& in, std::uint64_t* value, std::string* raw) {
  *value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    std::uint8_t byte = 0;
    if (!in.ReadByte(&byte)) return false;
    raw->push_back(static_cast<char>(byte));
    *value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;  // longer than ten bytes
}

}  // namespace

grpc::ByteBuffer EncodeChunk(const google::protobuf::MessageLite& header, int payload_field,
                             std::span<const grpc::Slice> payload) {
  std::string head = header.SerializeAsString();
  std::size_t payload_bytes = 0;
  for (const grpc::Slice& s : payload) payload_bytes += s.size();
  AppendVarint((static_cast<std::uint64_t>(payload_field) << 3) | kWireLengthDelimited, &head);
  AppendVarint(payload_bytes, &head);
  std::vector<grpc::Slice> slices;
  slices.reserve(1 + payload.size());
  slices.emplace_back(head);  // a few dozen bytes: copying them is free
  slices.insert(slices.end(), payload.begin(), payload.end());
  return grpc::ByteBuffer(slices.data(), slices.size());  // takes references
}

absl::Status DecodeChunk(const grpc::ByteBuffer& message, int payload_field,
                         google::protobuf::MessageLite* header, ChunkPayload* payload) {
  payload->slices.clear();
  payload->bytes = 0;
  std::vector<grpc::Slice> slices;
  if (message.Valid() && !message.Dump(&slices).ok()) {
    return absl::InvalidArgumentError("an unreadable chunk message");
  }
  SliceCursor in(slices);
  const auto malformed = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("a malformed ", header->GetTypeName(), " message"));
  };
  std::string rest;  // every field but the payload, as received, for protobuf to parse
  while (in.left() > 0) {
    std::string raw;  // this field's tag (and length) bytes
    std::uint64_t tag = 0;
    if (!ReadVarint(in, &tag, &raw)) return malformed();
    const std::uint64_t field = tag >> 3;
    switch (tag & 7) {
      case kWireVarint: {
        std::uint64_t value = 0;
        if (!ReadVarint(in, &value, &raw)) return malformed();
        rest += raw;
        break;
      }
      case kWireFixed64:
      case kWireFixed32:
        rest += raw;
        if (!in.CopyTo((tag & 7) == kWireFixed64 ? 8 : 4, &rest)) return malformed();
        break;
      case kWireLengthDelimited: {
        std::uint64_t length = 0;
        if (!ReadVarint(in, &length, &raw) || length > in.left()) return malformed();
        if (field == static_cast<std::uint64_t>(payload_field)) {
          payload->slices.clear();  // a repeated singular field: the last one counts
          in.SliceTo(length, &payload->slices);
          payload->bytes = length;
        } else {
          rest += raw;
          in.CopyTo(length, &rest);
        }
        break;
      }
      default:  // groups (wire types 3 and 4) and invalid types: proto3 has none
        return malformed();
    }
  }
  if (!header->ParseFromString(rest)) return malformed();
  return absl::OkStatus();
}

}  // namespace testbed
