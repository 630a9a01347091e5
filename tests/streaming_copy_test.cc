// StreamingCopy is memcpy, whatever the sizes and alignments.
#include <gtest/gtest.h>

#include <vector>

#include "worker/streaming_copy.h"

namespace testbed {
namespace {

TEST(StreamingCopy, MatchesMemcpyAtEveryAlignmentAndSize) {
  std::vector<std::byte> src(4096 + 64), dst(4096 + 64);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 7 + 3);
  for (std::size_t dst_shift = 0; dst_shift < 17; ++dst_shift) {
    for (std::size_t src_shift = 0; src_shift < 3; ++src_shift) {
      for (std::size_t size : {0, 1, 15, 16, 17, 63, 64, 65, 127, 1000, 4096}) {
        std::fill(dst.begin(), dst.end(), std::byte{0xEE});
        StreamingCopy(dst.data() + dst_shift, src.data() + src_shift, size);
        for (std::size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= dst_shift && i < dst_shift + size;
          const std::byte want = inside ? src[i - dst_shift + src_shift] : std::byte{0xEE};
          ASSERT_EQ(dst[i], want) << "dst+" << dst_shift << " src+" << src_shift << " size "
                                  << size << " byte " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace testbed
