// The UCX settings a worker applies unless the user set their own, and what
// its rows record of the settings that ran (allreduce/transport/ucx_settings.h).
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "allreduce/transport/ucx_settings.h"

namespace testbed {
namespace {

constexpr const char* kTx = "UCX_TCP_TX_SEG_SIZE";
constexpr const char* kRx = "UCX_TCP_RX_SEG_SIZE";

class UcxDefaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv(kTx);
    unsetenv(kRx);
  }
  void TearDown() override { SetUp(); }
  static std::string Env(const char* name) {
    const char* value = std::getenv(name);
    return value == nullptr ? "(unset)" : value;
  }
};

TEST_F(UcxDefaultsTest, SetsTheSegmentSizesWhereTheUserSetNeither) {
  const std::vector<UcxSetting> applied = ApplyUcxDefaults();
  EXPECT_EQ(Env(kTx), "256K");
  EXPECT_EQ(Env(kRx), "256K");
  ASSERT_EQ(applied.size(), 2u);
  EXPECT_EQ(applied[0].name, kTx);
}

// UCX refuses an RX segment smaller than the TX one: a user's TX of 1M beside
// the testbed's RX of 256K would fail every worker, so the pair is theirs.
TEST_F(UcxDefaultsTest, LeavesThePairToAUserWhoSetOneOfIt) {
  setenv(kTx, "1M", 1);
  EXPECT_TRUE(ApplyUcxDefaults().empty());
  EXPECT_EQ(Env(kTx), "1M");
  EXPECT_EQ(Env(kRx), "(unset)");
  SetUp();
  setenv(kRx, "64K", 1);
  EXPECT_TRUE(ApplyUcxDefaults().empty());
  EXPECT_EQ(Env(kTx), "(unset)");
  EXPECT_EQ(Env(kRx), "64K");
}

TEST(UcxEnvironmentTest, ListsEveryUcxVariableSortedAndMarksTheTestbeds) {
  const char* environment[] = {"UCX_TLS=tcp", "PATH=/usr/bin", "UCX_TCP_TX_SEG_SIZE=256K",
                               "UCX_NET_DEVICES=lo", "XUCX_NOT=1", nullptr};
  const std::vector<UcxSetting> applied = {{"UCX_TCP_TX_SEG_SIZE", "256K"}};
  EXPECT_EQ(DescribeUcxEnvironment(environment, applied),
            "UCX_NET_DEVICES=lo UCX_TCP_TX_SEG_SIZE=256K* UCX_TLS=tcp");
  // The same value set by the user is not the testbed's.
  EXPECT_EQ(DescribeUcxEnvironment(environment, {}),
            "UCX_NET_DEVICES=lo UCX_TCP_TX_SEG_SIZE=256K UCX_TLS=tcp");
  const char* none[] = {"HOME=/root", nullptr};
  EXPECT_EQ(DescribeUcxEnvironment(none, applied), "");
  EXPECT_EQ(DescribeUcxEnvironment(nullptr, applied), "");
}

}  // namespace
}  // namespace testbed
