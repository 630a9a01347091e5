#include "proto/chunk_wire.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>

#include <Eigen/Core>

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

// Eigen::half rounds to nearest even (F16C where the build targets it, the
// same bits in software otherwise), as the all-reduce's compression does
// (worker/train/compression.cc): one conversion for every fp16 in the testbed.
std::uint16_t FloatToHalf(float value) {
  return Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(value));
}

float HalfToFloat(std::uint16_t half) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(half));
}

void EncodeHalves(std::span<const float> values, std::byte* out) {
  for (const float value : values) {
    const std::uint16_t half = FloatToHalf(value);
    *out++ = static_cast<std::byte>(half & 0xff);
    *out++ = static_cast<std::byte>(half >> 8);
  }
}

void WidenHalves(std::span<const grpc::Slice> slices, float* out) {
  int pending = -1;  // the low byte of a half split across two slices
  for (const grpc::Slice& slice : slices) {
    const std::uint8_t* at = slice.begin();
    const std::uint8_t* const end = slice.end();
    if (pending >= 0 && at < end) {
      *out++ = HalfToFloat(static_cast<std::uint16_t>(pending | (*at++ << 8)));
      pending = -1;
    }
    for (; end - at >= 2; at += 2) {
      *out++ = HalfToFloat(static_cast<std::uint16_t>(at[0] | (at[1] << 8)));
    }
    if (at < end) pending = *at;
  }
}

void EncodeNonZeros(std::span<const float> values, std::vector<std::byte>* out) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(values[i]);
    if (bits == 0) continue;  // +0.0: what the shard's zeroed chunk holds already
    const auto index = static_cast<std::uint32_t>(i);
    for (int b = 0; b < 4; ++b) out->push_back(static_cast<std::byte>(index >> (8 * b)));
    for (int b = 0; b < 4; ++b) out->push_back(static_cast<std::byte>(bits >> (8 * b)));
  }
}

absl::Status ScatterPairs(std::span<const grpc::Slice> slices, std::size_t bytes,
                          std::span<float> out) {
  if (bytes % kSparsePairBytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a sparse chunk of ", bytes, " bytes is not whole (index, value) pairs"));
  }
  // A pair may straddle slices: read them from one contiguous copy (k pairs,
  // small next to the dense chunk they stand for).
  std::string pairs;
  pairs.reserve(bytes);
  for (const grpc::Slice& s : slices) {
    pairs.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  const auto* at = reinterpret_cast<const std::uint8_t*>(pairs.data());
  const auto read32 = [](const std::uint8_t* p) {
    return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
           static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
  };
  std::int64_t last = -1;
  for (std::size_t i = 0; i < pairs.size(); i += kSparsePairBytes) {
    const std::uint32_t index = read32(at + i);
    if (static_cast<std::int64_t>(index) <= last || index >= out.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a sparse chunk's index ", index, " is not ascending inside its ",
                       out.size(), " elements"));
    }
    last = index;
    out[index] = std::bit_cast<float>(read32(at + i + 4));
  }
  return absl::OkStatus();
}

}  // namespace testbed
