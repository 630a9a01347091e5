#include "server/call_limiter.h"

#include <gtest/gtest.h>

#include <optional>
#include <utility>
#include <vector>

namespace testbed {
namespace {

TEST(CallLimiterTest, AdmitsUpToTheLimitThenRefusesNamingIt) {
  CallLimiter limiter(2);
  std::vector<CallLimiter::Admission> calls;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<CallLimiter::Admission> call = limiter.Admit();
    ASSERT_TRUE(call.ok());
    calls.push_back(std::move(*call));
  }
  const absl::StatusOr<CallLimiter::Admission> third = limiter.Admit();
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(third.status().message(),
            "this server already serves 2 calls at once, its limit (testbed-server --max-calls)");
  EXPECT_EQ(limiter.in_progress(), 2);  // a refusal holds no place
}

TEST(CallLimiterTest, AnEndedCallGivesItsPlaceBackOnce) {
  CallLimiter limiter(1);
  {
    absl::StatusOr<CallLimiter::Admission> call = limiter.Admit();
    ASSERT_TRUE(call.ok());
    std::optional<CallLimiter::Admission> moved(std::move(*call));  // counted once, not twice
    EXPECT_EQ(limiter.in_progress(), 1);
    EXPECT_FALSE(limiter.Admit().ok());
  }
  EXPECT_EQ(limiter.in_progress(), 0);
  EXPECT_TRUE(limiter.Admit().ok());
}

}  // namespace
}  // namespace testbed
