// --algorithms auto's chooser on its own: with fitted constants in which one
// algorithm pays less per round and another less per byte, the choice must
// cross over where the model says, ties go to the first listed, and bad
// candidates are refused by name.
#include "allreduce/algorithm_choice.h"

#include <gtest/gtest.h>

#include <vector>

namespace testbed {
namespace {

constexpr std::int64_t kKiB = 1024, kMiB = 1024 * kKiB;

// Butterfly: 2 log2 N rounds, N M log2 N / N bytes on its busiest link; ring:
// 2(N-1) rounds of M/N. With the same alpha and beta, butterfly wins small
// messages (fewer rounds) and ring large ones (fewer bytes per link).
const std::vector<FittedAlgorithm> kSameLinks = {
    {"ring", {.alpha_s = 50e-6, .beta_s_per_byte = 1e-9}},
    {"butterfly", {.alpha_s = 50e-6, .beta_s_per_byte = 1e-9}},
};

TEST(AlgorithmChoiceTest, FewRoundsWinSmallMessagesFewBytesWinLargeOnes) {
  const std::vector<std::int64_t> sizes = {8, 64 * kKiB, 64 * kMiB};
  const auto choices = ChooseAlgorithms(kSameLinks, 8, 1, sizes, 4);
  ASSERT_TRUE(choices.ok()) << choices.status();
  ASSERT_EQ(choices->size(), 3u);
  EXPECT_EQ((*choices)[0].algorithm, "butterfly");
  EXPECT_EQ((*choices)[2].algorithm, "ring");
  for (const AlgorithmChoice& choice : *choices) {
    ASSERT_EQ(choice.predictions.size(), 2u);
    EXPECT_LE(choice.predictions[0].time_us, choice.predictions[1].time_us);
    EXPECT_EQ(choice.predictions[0].algorithm, choice.algorithm);
  }
}

TEST(AlgorithmChoiceTest, PredictionsAreTheCostModelsTimes) {
  const std::vector<std::int64_t> sizes = {16 * kMiB};
  const auto choices = ChooseAlgorithms(kSameLinks, 4, 1, sizes, 4);
  ASSERT_TRUE(choices.ok());
  // Ring, N = 4: 6 rounds of 4 MiB: 6 * 50 us + 24 MiB * 1 ns.
  EXPECT_EQ((*choices)[0].algorithm, "ring");
  EXPECT_NEAR((*choices)[0].predictions[0].time_us, 300 + 24 * kMiB * 1e-3, 1e-6);
}

TEST(AlgorithmChoiceTest, EachCandidateKeepsItsOwnConstants) {
  // A parameter server whose fitted link is 100 times faster than the ring's
  // wins at every size, whatever the closed forms say.
  const std::vector<FittedAlgorithm> candidates = {
      {"ring", {.alpha_s = 50e-6, .beta_s_per_byte = 1e-9}},
      {"ps", {.alpha_s = 0.5e-6, .beta_s_per_byte = 1e-11}},
  };
  const std::vector<std::int64_t> sizes = {4, 1 * kMiB, 256 * kMiB};
  const auto choices = ChooseAlgorithms(candidates, 4, 1, sizes, 4);
  ASSERT_TRUE(choices.ok());
  for (const AlgorithmChoice& choice : *choices) EXPECT_EQ(choice.algorithm, "ps") << choice.bytes;
}

TEST(AlgorithmChoiceTest, ATieGoesToTheFirstListed) {
  const std::vector<FittedAlgorithm> candidates = {
      {"tree", {.alpha_s = 0, .beta_s_per_byte = 0}},
      {"ring", {.alpha_s = 0, .beta_s_per_byte = 0}},
  };
  const std::vector<std::int64_t> sizes = {kMiB};
  const auto choices = ChooseAlgorithms(candidates, 4, 1, sizes, 4);
  ASSERT_TRUE(choices.ok());
  EXPECT_EQ((*choices)[0].algorithm, "tree");
}

TEST(AlgorithmChoiceTest, RefusesWhatIsNotAnAllReduce) {
  const std::vector<std::int64_t> sizes = {kMiB};
  EXPECT_FALSE(ChooseAlgorithms({}, 4, 1, sizes, 4).ok());
  const auto not_all_reduce =
      ChooseAlgorithms({{"reduce-scatter", {1e-6, 1e-9}}}, 4, 1, sizes, 4);
  ASSERT_FALSE(not_all_reduce.ok());
  EXPECT_NE(not_all_reduce.status().message().find("reduce-scatter"), std::string::npos);
  EXPECT_FALSE(ChooseAlgorithms({{"auto", {1e-6, 1e-9}}}, 4, 1, sizes, 4).ok());
}

TEST(AlgorithmChoiceTest, DescriptionNamesTheChoiceFirstThenTheOthers) {
  const AlgorithmChoice choice{
      .bytes = kMiB,
      .algorithm = "ring",
      .predictions = {{"ring", 812}, {"tree", 905}, {"butterfly", 1020}}};
  EXPECT_EQ(DescribeChoice(choice, "fitted to a calibration run"),
            "ring: predicted 812 us; tree 905 us, butterfly 1020 us (fitted to a calibration run)");
}

TEST(AlgorithmChoiceTest, CalibrationSpansTheSizesUpToTheCap) {
  const std::vector<std::int64_t> sweep = {8, 4 * kKiB, 1 * kMiB, 64 * kMiB};
  // The middle: sqrt(8 * 4 MiB) = 5792.6 bytes, down to whole elements.
  EXPECT_EQ(CalibrationSizes(sweep, 4, 4 * kMiB), (std::vector<std::int64_t>{8, 5792, 4 * kMiB}));
  // One size: a second, 64 times smaller, so alpha and beta can be told apart.
  const std::vector<std::int64_t> one = {kMiB};
  const std::vector<std::int64_t> two = CalibrationSizes(one, 4, 4 * kMiB);
  ASSERT_EQ(two.size(), 3u);
  EXPECT_EQ(two.front(), 16 * kKiB);
  EXPECT_EQ(two.back(), kMiB);
  // One element: 1 and 64 elements.
  const std::vector<std::int64_t> tiny = {4};
  EXPECT_EQ(CalibrationSizes(tiny, 4, 4 * kMiB), (std::vector<std::int64_t>{4, 32, 256}));
  for (std::int64_t size : CalibrationSizes(sweep, 8, 4 * kMiB)) EXPECT_EQ(size % 8, 0) << size;
}

}  // namespace
}  // namespace testbed
