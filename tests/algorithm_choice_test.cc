// --algorithms auto's chooser on its own: with fitted constants in which one
// algorithm pays less per round and another less per byte, the choice must
// cross over where the model says, ties go to the first listed, and bad
// candidates are refused by name.
#include "allreduce/algorithm_choice.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace testbed {
namespace {

constexpr std::int64_t kKiB = 1024, kMiB = 1024 * kKiB;

// Butterfly: 2 log2 N rounds, N M log2 N / N bytes on its busiest link; ring:
// 2(N-1) rounds of M/N. With the same alpha and beta, butterfly wins small
// messages (fewer rounds) and ring large ones (fewer bytes per link).
const std::vector<FittedAlgorithm> kSameLinks = {
    {"ring", {.alpha_s = 50e-6, .beta_s_per_byte = 1e-9}, {}},
    {"butterfly", {.alpha_s = 50e-6, .beta_s_per_byte = 1e-9}, {}},
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
      {"ring", {.alpha_s = 50e-6, .beta_s_per_byte = 1e-9}, {}},
      {"ps", {.alpha_s = 0.5e-6, .beta_s_per_byte = 1e-11}, {}},
  };
  const std::vector<std::int64_t> sizes = {4, 1 * kMiB, 256 * kMiB};
  const auto choices = ChooseAlgorithms(candidates, 4, 1, sizes, 4);
  ASSERT_TRUE(choices.ok());
  for (const AlgorithmChoice& choice : *choices) EXPECT_EQ(choice.algorithm, "ps") << choice.bytes;
}

TEST(AlgorithmChoiceTest, ATieGoesToTheFirstListed) {
  const std::vector<FittedAlgorithm> candidates = {
      {"tree", {.alpha_s = 0, .beta_s_per_byte = 0}, {}},
      {"ring", {.alpha_s = 0, .beta_s_per_byte = 0}, {}},
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
      ChooseAlgorithms({{"reduce-scatter", {1e-6, 1e-9}, {}}}, 4, 1, sizes, 4);
  ASSERT_FALSE(not_all_reduce.ok());
  EXPECT_NE(not_all_reduce.status().message().find("reduce-scatter"), std::string::npos);
  EXPECT_FALSE(ChooseAlgorithms({{"auto", {1e-6, 1e-9}, {}}}, 4, 1, sizes, 4).ok());
}

TEST(AlgorithmChoiceTest, DescriptionNamesTheChoiceFirstThenTheOthers) {
  const AlgorithmChoice choice{.bytes = kMiB,
                               .algorithm = "ring",
                               .predictions = {{"ring", 812, PredictionBasis::kModel},
                                               {"tree", 905, PredictionBasis::kModel},
                                               {"butterfly", 1020, PredictionBasis::kModel}}};
  EXPECT_EQ(DescribeChoice(choice, "fitted to a calibration run"),
            "ring: predicted 812 us; tree 905 us, butterfly 1020 us (fitted to a calibration run)");
}

TEST(AlgorithmChoiceTest, CalibrationMeasuresTheRequestedSizesUpToTheCap) {
  const std::vector<std::int64_t> sweep = {8, 4 * kKiB, 1 * kMiB, 64 * kMiB};
  // The requested sizes within the cap, then the cap for what lies beyond.
  EXPECT_EQ(CalibrationSizes(sweep, 4, 4 * kMiB),
            (std::vector<std::int64_t>{8, 4 * kKiB, kMiB, 4 * kMiB}));
  // One size: a second, 64 times smaller, so alpha and beta can be told apart.
  const std::vector<std::int64_t> one = {kMiB};
  EXPECT_EQ(CalibrationSizes(one, 4, 4 * kMiB), (std::vector<std::int64_t>{16 * kKiB, kMiB}));
  // Only sizes beyond the cap: the cap and 1/64 of it.
  const std::vector<std::int64_t> large = {64 * kMiB};
  EXPECT_EQ(CalibrationSizes(large, 4, 4 * kMiB), (std::vector<std::int64_t>{64 * kKiB, 4 * kMiB}));
  // One element: 1 and 64 elements.
  const std::vector<std::int64_t> tiny = {4};
  EXPECT_EQ(CalibrationSizes(tiny, 4, 4 * kMiB), (std::vector<std::int64_t>{4, 256}));
  for (std::int64_t size : CalibrationSizes(sweep, 8, 4 * kMiB)) EXPECT_EQ(size % 8, 0) << size;
}

TEST(AlgorithmChoiceTest, ManyRequestedSizesAreThinnedEvenlyKeepingBothEnds) {
  std::vector<std::int64_t> sweep;  // 8 B, 16 B, ..., 2 MiB: 19 sizes within the cap
  for (std::int64_t bytes = 8; bytes <= 2 * kMiB; bytes *= 2) sweep.push_back(bytes);
  sweep.push_back(64 * kMiB);  // and one beyond it
  const std::vector<std::int64_t> chosen = CalibrationSizes(sweep, 4, 4 * kMiB);
  ASSERT_EQ(chosen.size(), kMaxCalibrationSizes);
  EXPECT_EQ(chosen.front(), 8);
  EXPECT_EQ(chosen[chosen.size() - 2], 2 * kMiB);
  EXPECT_EQ(chosen.back(), 4 * kMiB);
  for (std::size_t i = 0; i + 2 < chosen.size(); ++i) {
    EXPECT_NE(std::find(sweep.begin(), sweep.end(), chosen[i]), sweep.end()) << chosen[i];
    // 18 steps of x2 over 6 gaps: every third size.
    EXPECT_EQ(chosen[i + 1], chosen[i] * 8) << i;
  }
}

// Where a candidate was measured, its times decide: at a measured size the
// measurement, between two the line through them, and the fitted line only
// beyond them.
TEST(AlgorithmChoiceTest, MeasurementsDecideWhereTheyReachTheLineBeyond) {
  const FittedAlgorithm tree{"tree",
                             {.alpha_s = 50e-6, .beta_s_per_byte = 1e-9},
                             {{4 * kKiB, 40}, {32 * kKiB, 60}, {256 * kKiB, 300}}};
  auto at = [&](std::int64_t bytes) { return *Predict(tree, 4, 1, bytes, 4); };
  EXPECT_EQ(at(32 * kKiB).basis, PredictionBasis::kMeasured);
  EXPECT_DOUBLE_EQ(at(32 * kKiB).time_us, 60);
  EXPECT_EQ(at(18 * kKiB).basis, PredictionBasis::kInterpolated);
  EXPECT_DOUBLE_EQ(at(18 * kKiB).time_us, 50);  // halfway from 4 KiB to 32 KiB
  EXPECT_DOUBLE_EQ(at(144 * kKiB).time_us, 180);
  const Prediction beyond = at(kMiB);
  EXPECT_EQ(beyond.basis, PredictionBasis::kModel);
  const auto model = EstimateAlgorithm("tree", 4, 1, kMiB, 4, tree.link);
  EXPECT_DOUBLE_EQ(beyond.time_us, model->time_s * 1e6);
  EXPECT_EQ(at(kKiB).basis, PredictionBasis::kModel);  // below the smallest measured
  // What the model cannot run is refused, measured or not.
  EXPECT_FALSE(Predict({"no-such", tree.link, tree.measured}, 4, 1, 32 * kKiB, 4).ok());
}

// The case a single line per algorithm got wrong: tree measured fast in the
// middle sizes, where both fitted lines put ring ahead. The measurement wins.
TEST(AlgorithmChoiceTest, AMeasuredMiddleOverridesTheFittedLines) {
  const std::vector<std::int64_t> sizes = {32 * kKiB};
  const FittedAlgorithm ring{"ring", {.alpha_s = 10e-6, .beta_s_per_byte = 1e-9}, {}};
  FittedAlgorithm tree{"tree", {.alpha_s = 60e-6, .beta_s_per_byte = 2e-9}, {}};
  ASSERT_EQ((*ChooseAlgorithms({ring, tree}, 4, 1, sizes, 4))[0].algorithm, "ring");
  tree.measured = {{8, 20}, {32 * kKiB, 63}};
  const auto choices = ChooseAlgorithms({ring, tree}, 4, 1, sizes, 4);
  ASSERT_TRUE(choices.ok());
  EXPECT_EQ((*choices)[0].algorithm, "tree");
  EXPECT_EQ(DescribeChoice((*choices)[0], "test").rfind("tree: measured 63 us; ring ", 0), 0u)
      << DescribeChoice((*choices)[0], "test");
}

TEST(AlgorithmChoiceTest, DescriptionSaysWhatEachTimeRestsOn) {
  const AlgorithmChoice choice{.bytes = kMiB,
                               .algorithm = "ring",
                               .predictions = {{"ring", 812, PredictionBasis::kInterpolated},
                                               {"tree", 905, PredictionBasis::kModel},
                                               {"butterfly", 1020, PredictionBasis::kMeasured}}};
  EXPECT_EQ(DescribeChoice(choice, "src"),
            "ring: interpolated 812 us; tree 905 us, butterfly measured 1020 us (src)");
}

}  // namespace
}  // namespace testbed
