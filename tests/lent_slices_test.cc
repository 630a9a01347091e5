// Memory handed to gRPC without a copy: lent slices point at the caller's
// bytes and report when gRPC lets go; shared slices keep their owner alive.
#include <gtest/gtest.h>

#include <grpcpp/support/byte_buffer.h>

#include <optional>
#include <vector>

#include "proto/lent_slices.h"

namespace testbed {
namespace {

using Clock = std::chrono::steady_clock;

TEST(LentSlices, PointAtTheCallersBytesUntilEveryHolderLetsGo) {
  std::vector<std::byte> data(4096, std::byte{7});
  LentSlices lent;
  std::optional<grpc::ByteBuffer> message;
  {
    grpc::Slice slices[] = {lent.Lend(data.data(), 1000), lent.Lend(data.data() + 1000, 3096)};
    EXPECT_EQ(slices[0].begin(), reinterpret_cast<const std::uint8_t*>(data.data()));  // no copy
    message.emplace(slices, 2);  // a message gRPC would send holds them
  }
  EXPECT_EQ(lent.outstanding(), 2u);
  EXPECT_FALSE(lent.WaitAllReturned(Clock::now() + std::chrono::milliseconds(20)));
  grpc::ByteBuffer copy = *message;  // another holder of the same slices
  message.reset();
  EXPECT_FALSE(lent.WaitAllReturned(Clock::now() + std::chrono::milliseconds(20)));
  copy.Clear();
  EXPECT_TRUE(lent.WaitAllReturned(Clock::now()));
  EXPECT_EQ(lent.outstanding(), 0u);
}

TEST(LentSlices, ASliceMayOutliveTheLender) {
  std::vector<std::byte> data(16);
  std::optional<grpc::Slice> kept;
  {
    LentSlices lent;
    kept.emplace(lent.Lend(data.data(), data.size()));
  }
  EXPECT_EQ(kept->size(), 16u);
  kept.reset();  // its release finds the lender gone and frees the shared state
}

TEST(SharedSlice, HoldsItsOwnerUntilReleased) {
  auto owner = std::make_shared<std::vector<std::byte>>(64, std::byte{1});
  const std::weak_ptr<std::vector<std::byte>> watch = owner;
  std::optional<grpc::Slice> slice(SharedSlice(std::span(*owner).subspan(8, 32), owner));
  owner.reset();
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(slice->size(), 32u);
  slice.reset();
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace testbed
