// --algorithms auto's resolution in the CLI, without daemons: which
// candidates it weighs, the calibration run it asks for, the constants it
// fits from rows (recovered exactly from rows the model itself made), and the
// submissions it turns a spec into.
#include "experiments/cli/auto_algorithms.h"

#include <gtest/gtest.h>

#include <sstream>

#include "experiments/results/result_row.h"
#include "proto/spec.h"

namespace testbed {
namespace {

constexpr std::int64_t kKiB = 1024, kMiB = 1024 * kKiB;

proto::ExperimentSpec Spec(std::vector<std::string> algorithms, std::vector<std::int64_t> sizes,
                           proto::Op::Kind op = proto::Op::sum) {
  proto::ExperimentSpec spec;
  spec.set_workers(4);
  for (const std::string& a : algorithms) spec.add_algorithms(a);
  for (std::int64_t s : sizes) spec.add_sizes(s);
  spec.set_op(op);
  ApplyDefaults(spec);
  return spec;
}

// A row whose median time is exactly what `link` predicts for it.
proto::ResultRow ModelRow(const std::string& algorithm, std::int64_t bytes, const LinkModel& link,
                          const std::string& transport = "ucx:tcp/lo.0") {
  proto::ResultRow row;
  row.set_algorithm(algorithm);
  row.set_workers(4);
  row.set_bytes(bytes);
  row.set_dtype("float32");
  row.set_servers(algorithm == "ps" ? 1 : 0);
  row.set_transport(transport);
  const double time_us = EstimateRow(row, link)->time_s * 1e6;
  row.set_time_us_p50(time_us);
  row.set_time_us_avg(time_us * 3);  // a slow outlier: the fit must not see it
  return row;
}

TEST(AutoAlgorithmsTest, OnlyAutoNamesAuto) {
  EXPECT_TRUE(NamesAuto(Spec({"ring", "auto"}, {8})));
  EXPECT_FALSE(NamesAuto(Spec({"ring", "tree"}, {8})));
}

TEST(AutoAlgorithmsTest, CandidatesAreTheAllReducesAndPsOnlyForSums) {
  const std::vector<std::string> sum = AutoCandidates(Spec({"auto"}, {8}));
  EXPECT_NE(std::find(sum.begin(), sum.end(), "ps"), sum.end());
  EXPECT_NE(std::find(sum.begin(), sum.end(), "halving-doubling"), sum.end());
  EXPECT_EQ(std::find(sum.begin(), sum.end(), "reduce-scatter"), sum.end());
  const std::vector<std::string> max = AutoCandidates(Spec({"auto"}, {8}, proto::Op::max));
  EXPECT_EQ(std::find(max.begin(), max.end(), "ps"), max.end());
  EXPECT_EQ(max.size() + 1, sum.size());
}

TEST(AutoAlgorithmsTest, CalibrationRunsEveryCandidateShortAndCapped) {
  const proto::ExperimentSpec calibration =
      CalibrationSpec(Spec({"auto"}, {8, 64 * kKiB, 256 * kMiB}));
  EXPECT_EQ(static_cast<std::size_t>(calibration.algorithms_size()),
            AutoCandidates(Spec({"auto"}, {8})).size());
  ASSERT_GE(calibration.sizes_size(), 2);
  EXPECT_EQ(calibration.sizes(0), 8);
  EXPECT_EQ(calibration.sizes(calibration.sizes_size() - 1), 4 * kMiB);
  EXPECT_EQ(calibration.iterations(), 10u);
  EXPECT_TRUE(ValidateSpec(calibration).ok());  // what the daemons accept: no auto in it
}

TEST(AutoAlgorithmsTest, FitsEachCandidatesOwnConstantsFromMedians) {
  const LinkModel ring{20e-6, 1e-9}, tree{80e-6, 0.5e-9};
  std::vector<proto::ResultRow> rows;
  for (std::int64_t bytes : {std::int64_t{8}, 64 * kKiB, 4 * kMiB}) {
    rows.push_back(ModelRow("ring", bytes, ring));
    rows.push_back(ModelRow("tree", bytes, tree));
  }
  std::ostringstream log;
  const auto fitted = FitCandidates(rows, {"ring", "tree", "butterfly"}, Spec({"auto"}, {8}), log);
  ASSERT_TRUE(fitted.ok()) << fitted.status();
  ASSERT_EQ(fitted->size(), 2u);
  EXPECT_EQ((*fitted)[0].algorithm, "ring");
  EXPECT_NEAR((*fitted)[0].link.alpha_s, ring.alpha_s, 1e-9);
  EXPECT_NEAR((*fitted)[0].link.beta_s_per_byte, ring.beta_s_per_byte, 1e-13);
  EXPECT_NEAR((*fitted)[1].link.alpha_s, tree.alpha_s, 1e-9);
  EXPECT_NE(log.str().find("leaves out butterfly: no rows of it"), std::string::npos) << log.str();
}

// The measurements a choice may rest on are the rows of the run it is for:
// same N, element type and (ps) shards; one size from several files counts
// once, at the median of theirs.
TEST(AutoAlgorithmsTest, MeasuredTimesAreThoseOfTheSameRunShape) {
  const LinkModel link{20e-6, 1e-9};
  std::vector<proto::ResultRow> rows;
  for (double p50 : {30.0, 10.0, 20.0}) {
    proto::ResultRow row = ModelRow("ring", 8, link);
    row.set_time_us_p50(p50);
    rows.push_back(row);
  }
  rows.push_back(ModelRow("ring", kMiB, link));
  proto::ResultRow other_n = ModelRow("ring", 64 * kKiB, link);
  other_n.set_workers(8);
  proto::ResultRow other_dtype = ModelRow("ring", 4 * kKiB, link);
  other_dtype.set_dtype("float64");
  rows.push_back(other_n);
  rows.push_back(other_dtype);
  proto::ResultRow ps = ModelRow("ps", 8, link);
  rows.push_back(ps);
  ps.set_bytes(kMiB);
  rows.push_back(ps);
  ps.set_servers(2);
  ps.set_bytes(64 * kKiB);
  rows.push_back(ps);
  std::ostringstream log;
  const auto fitted = FitCandidates(rows, {"ring", "ps"}, Spec({"auto"}, {8}), log);
  ASSERT_TRUE(fitted.ok()) << fitted.status() << log.str();
  ASSERT_EQ(fitted->size(), 2u);
  const std::vector<MeasuredTime>& ring = (*fitted)[0].measured;
  ASSERT_EQ(ring.size(), 2u);
  EXPECT_EQ(ring[0].bytes, 8);
  EXPECT_DOUBLE_EQ(ring[0].time_us, 20);
  EXPECT_EQ(ring[1].bytes, kMiB);
  const std::vector<MeasuredTime>& one_shard = (*fitted)[1].measured;
  ASSERT_EQ(one_shard.size(), 2u);  // not the S = 2 row
  EXPECT_EQ(one_shard[1].bytes, kMiB);
}

TEST(AutoAlgorithmsTest, RefusesRowsOfTwoClustersAndNothingToFit) {
  const LinkModel link{20e-6, 1e-9};
  std::vector<proto::ResultRow> rows = {ModelRow("ring", 8, link, "ucx:tcp/lo.0"),
                                        ModelRow("ring", kMiB, link, "ucx:tcp/lo.0"),
                                        ModelRow("ring", 8, link, "ucx:sysv"),
                                        ModelRow("ring", kMiB, link, "ucx:sysv")};
  std::ostringstream log;
  const auto mixed = FitCandidates(rows, {"ring"}, Spec({"auto"}, {8}), log);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("ring over 2 transports"), std::string::npos);
  const auto one_size =
      FitCandidates({ModelRow("tree", 8, link)}, {"tree"}, Spec({"auto"}, {8}), log);
  ASSERT_FALSE(one_size.ok());
  EXPECT_NE(one_size.status().message().find("no all-reduce could be fitted (tree)"),
            std::string::npos)
      << one_size.status();
}

TEST(AutoAlgorithmsTest, ResolvesIntoNamedAlgorithmsThenOneSubmissionPerChoice) {
  const proto::ExperimentSpec spec = Spec({"ring", "auto"}, {8, 4 * kKiB, 16 * kMiB});
  const std::vector<AlgorithmChoice> choices = {
      {8,
       "butterfly",
       {{"butterfly", 10, PredictionBasis::kModel}, {"ring", 30, PredictionBasis::kModel}}},
      {4 * kKiB,
       "butterfly",
       {{"butterfly", 20, PredictionBasis::kModel}, {"ring", 40, PredictionBasis::kModel}}},
      {16 * kMiB,
       "ring",
       {{"ring", 900, PredictionBasis::kModel}, {"butterfly", 1500, PredictionBasis::kModel}}}};
  const std::vector<ResolvedSubmission> resolved = ResolveAuto(spec, choices, "test");
  ASSERT_EQ(resolved.size(), 3u);
  // What the user named runs as given, its rows unmarked.
  EXPECT_EQ(resolved[0].spec.algorithms_size(), 1);
  EXPECT_EQ(resolved[0].spec.algorithms(0), "ring");
  EXPECT_EQ(resolved[0].spec.sizes_size(), 3);
  EXPECT_TRUE(resolved[0].chosen_by.empty());
  // Then each chosen algorithm with the sizes it was chosen for.
  EXPECT_EQ(resolved[1].spec.algorithms(0), "butterfly");
  EXPECT_EQ(std::vector<std::int64_t>(resolved[1].spec.sizes().begin(),
                                      resolved[1].spec.sizes().end()),
            (std::vector<std::int64_t>{8, 4 * kKiB}));
  EXPECT_EQ(resolved[1].chosen_by.at(8), "butterfly: predicted 10 us; ring 30 us (test)");
  EXPECT_EQ(resolved[2].spec.algorithms(0), "ring");
  EXPECT_EQ(resolved[2].spec.sizes_size(), 1);
  EXPECT_EQ(resolved[2].chosen_by.count(16 * kMiB), 1u);
  for (const ResolvedSubmission& s : resolved) EXPECT_TRUE(ValidateSpec(s.spec).ok());
}

TEST(AutoAlgorithmsTest, OnlyTheCliAcceptsAuto) {
  const proto::ExperimentSpec spec = Spec({"auto"}, {8});
  EXPECT_TRUE(ValidateSpec(spec, SpecReader::kCli).ok());
  const absl::Status daemon = ValidateSpec(spec);
  ASSERT_FALSE(daemon.ok());
  EXPECT_NE(daemon.message().find("unknown algorithm 'auto'"), std::string::npos);
  EXPECT_TRUE(UsesParameterServer(spec));  // auto may choose ps: its shards must be there
  EXPECT_FALSE(UsesParameterServer(Spec({"auto"}, {8}, proto::Op::max)));
}

}  // namespace
}  // namespace testbed
