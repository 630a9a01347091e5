// `testbed train`'s one spelling of a run: flags fill a TrainingSpec, a spec
// file gives one (flags beside it override, a typed flag replacing its sweep
// axis), sweep axes expand to their cross-product, and every spec in
// experiments/specs meant for `testbed train` parses and expands to valid runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "experiments/cli/train_flags.h"
#include "experiments/cli/train_sweep.h"
#include "worker/train/rank_training.h"

namespace testbed {
namespace {

const std::string kTradeoffs =
    std::string(TESTBED_SOURCE_DIR) + "/experiments/specs/training_tradeoffs.textproto";

absl::StatusOr<proto::TrainingSpec> Build(const std::string& command_line) {
  CLI::App app("testbed");
  TrainOptions options;
  AddTrainCommand(app, options);
  app.parse("testbed " + command_line, /*program_name_included=*/true);
  return BuildTrainingSpec(options);
}

TEST(TrainSpecTest, TheTradeoffsSpecParsesAndExpandsToItsCrossProduct) {
  const absl::StatusOr<proto::TrainingSpec> spec = Build("train --spec " + kTradeoffs);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->network(), proto::Network::netns);
  const std::vector<TrainingRun> runs = ExpandTrainingSpec(*spec);
  ASSERT_EQ(runs.size(), 2u * 2 * 8 * 3);  // links x models x schemes x N
  std::set<std::string> schemes, models;
  std::set<std::uint64_t> links;
  for (const TrainingRun& run : runs) {
    const absl::StatusOr<TrainingSetup> setup = TrainingSetupFromSpec(run.spec);
    ASSERT_TRUE(setup.ok()) << run.scheme << ": " << setup.status();
    EXPECT_TRUE(run.spec.worker_counts().empty() && run.spec.schemes().empty());
    schemes.insert(run.scheme);
    models.insert(run.model);
    links.insert(run.spec.link_rate_bps());
    if (run.scheme == "ps-SN") {
      EXPECT_EQ(setup->servers, setup->workers);  // S = N
    }
    if (run.scheme == "ps-S1") {
      EXPECT_EQ(setup->servers, 1);
    }
    if (run.scheme == "ring+bucket+overlap+fp16") {
      EXPECT_TRUE(setup->overlap);
      EXPECT_EQ(setup->bucket_bytes, 1u << 20);
      EXPECT_EQ(setup->compression.kind, CompressionConfig::Kind::kFp16);
    }
    if (run.model == "large") {
      EXPECT_EQ(setup->train.hidden, (std::vector<int>{1024, 1024}));
    }
  }
  EXPECT_EQ(schemes.size(), 8u);
  EXPECT_EQ(models, (std::set<std::string>{"small", "large"}));
  EXPECT_EQ(links, (std::set<std::uint64_t>{1000000000, 100000000}));
  // N ascending within each (link, model, scheme): N = 1, when swept, comes first.
  EXPECT_EQ(runs[0].spec.workers(), 2u);
  EXPECT_EQ(runs[1].spec.workers(), 4u);
  EXPECT_EQ(runs[2].spec.workers(), 8u);
}

// Every spec meant for `testbed train` (experiments/specs/training_*.textproto)
// parses, and each of its runs is one a worker accepts.
TEST(TrainSpecTest, EveryTrainingSpecParsesAndEachRunIsValid) {
  int specs = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(TESTBED_SOURCE_DIR) + "/experiments/specs")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("training_", 0) != 0 || entry.path().extension() != ".textproto") continue;
    SCOPED_TRACE(name);
    ++specs;
    const absl::StatusOr<proto::TrainingSpec> spec = Build("train --spec " + entry.path().string());
    ASSERT_TRUE(spec.ok()) << spec.status();
    const std::vector<TrainingRun> runs = ExpandTrainingSpec(*spec);
    EXPECT_FALSE(runs.empty());
    for (const TrainingRun& run : runs) {
      const absl::StatusOr<TrainingSetup> setup = TrainingSetupFromSpec(run.spec);
      EXPECT_TRUE(setup.ok()) << run.scheme << ": " << setup.status();
    }
  }
  EXPECT_GE(specs, 2) << "training_tradeoffs and training_accuracy at least";
}

TEST(TrainSpecTest, FlagsBesideASpecOverrideItAndReplaceTheirAxis) {
  const absl::StatusOr<proto::TrainingSpec> spec =
      Build("train --spec " + kTradeoffs + " -n 2 --link-rate 100mbit --steps 20");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->steps(), 20u);
  EXPECT_EQ(spec->batch(), 32u);  // the file's, untouched
  const std::vector<TrainingRun> runs = ExpandTrainingSpec(*spec);
  ASSERT_EQ(runs.size(), 2u * 8);  // models x schemes
  for (const TrainingRun& run : runs) {
    EXPECT_EQ(run.spec.workers(), 2u);
    EXPECT_EQ(run.spec.link_rate_bps(), 100000000u);
  }
  const absl::StatusOr<proto::TrainingSpec> one =
      Build("train --spec " + kTradeoffs + " --sync tree --hidden 32");
  ASSERT_TRUE(one.ok()) << one.status();
  const std::vector<TrainingRun> tree = ExpandTrainingSpec(*one);
  ASSERT_EQ(tree.size(), 2u * 3);  // links x N
  EXPECT_EQ(tree[0].spec.sync(), "tree");
}

TEST(TrainSpecTest, WithoutASpecTheFlagsAreTheSpec) {
  const absl::StatusOr<proto::TrainingSpec> spec =
      Build("train --sync tree -n 3 --hidden 32,16 --optimizer adam --lr 0.001 --compress fp16 "
            "--bucket-mb 0.5 --overlap --steps 7 --seed 9 --report-every 2 --network loopback");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::vector<TrainingRun> runs = ExpandTrainingSpec(*spec);
  ASSERT_EQ(runs.size(), 1u);
  const absl::StatusOr<TrainingSetup> setup = TrainingSetupFromSpec(runs[0].spec);
  ASSERT_TRUE(setup.ok()) << setup.status();
  EXPECT_EQ(setup->sync, "tree");
  EXPECT_EQ(setup->workers, 3);
  EXPECT_EQ(setup->train.hidden, (std::vector<int>{32, 16}));
  EXPECT_EQ(setup->train.optimizer, "adam");
  EXPECT_DOUBLE_EQ(setup->train.learning_rate, 0.001);
  EXPECT_EQ(setup->compression.kind, CompressionConfig::Kind::kFp16);
  EXPECT_EQ(setup->bucket_bytes, 1u << 19);
  EXPECT_TRUE(setup->overlap);
  EXPECT_EQ(setup->train.steps, 7);
  EXPECT_EQ(setup->train.seed, 9u);
  EXPECT_EQ(setup->report.every_steps, 2);
  ASSERT_TRUE(runs[0].spec.has_network());
  EXPECT_EQ(runs[0].spec.network(), proto::Network::loopback);
  // And back: the spec of a setup is that setup.
  const absl::StatusOr<TrainingSetup> again = TrainingSetupFromSpec(TrainingSpecOf(*setup));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(TrainingSpecOf(*again).DebugString(), TrainingSpecOf(*setup).DebugString());
}

TEST(TrainSpecTest, BadSpecsAreRefusedByName) {
  const std::string path = std::filesystem::temp_directory_path() / "testbed_bad_train.textproto";
  std::ofstream(path) << "workers: 2\nsync: \"ring\"\nsteps: \"many\"\n";
  const absl::StatusOr<proto::TrainingSpec> bad = Build("train --spec " + path);
  EXPECT_NE(bad.status().message().find("testbed_bad_train.textproto:3:"), std::string::npos)
      << bad.status();
  std::ofstream(path) << "schemes { name: \"x\" sync: \"quicksort\" }\n";
  const absl::StatusOr<proto::TrainingSpec> unknown = Build("train --spec " + path);
  EXPECT_NE(unknown.status().message().find("scheme x: unknown --sync 'quicksort'"),
            std::string::npos)
      << unknown.status();
  std::filesystem::remove(path);
  EXPECT_NE(Build("train --link-rate 1gbit").status().message().find("--network netns"),
            std::string::npos);
  EXPECT_NE(Build("train --deployment run").status().message().find("--coordinator"),
            std::string::npos);
  EXPECT_NE(Build("train --deployment run -c h:1 --network loopback").status().message().find(
                "--network places"),
            std::string::npos);
}

// A training spec written when its choices were strings is refused with one
// line naming the field, the old value and the new spelling - a field inside
// a scheme too - never read with the field dropped.
TEST(TrainSpecTest, OldStringSpellingsAreRefusedWithTheNewOne) {
  const std::string path = std::filesystem::temp_directory_path() / "testbed_old_train.textproto";
  for (const auto& [line, old, expected] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"network: \"netns\"", "network: \"netns\"", "network: netns"},
           {"link_rate: \"1gbit\"", "link_rate: \"1gbit\"", "link_rate_bps: 1000000000"},
           {"link_rates: [\"1gbit\", \"100mbit\"]", "link_rates: [\"1gbit\", \"100mbit\"]",
            "link_rates_bps: [1000000000, 100000000]"},
           {"lr_scaling: \"linear\"", "lr_scaling: \"linear\"", "lr_scaling: linear"},
           {"compress: \"topk:0.01\"", "compress: \"topk:0.01\"",
            "compression { topk_ratio: 0.01 }"},
           {"ps_mode: \"ssp:2\"", "ps_mode: \"ssp:2\"",
            "ps_mode { consistency: BOUNDED_STALENESS staleness: 2 }"},
           {"schemes { name: \"r\" sync: \"ring\" bucket_mb: 1 }", "bucket_mb: 1",
            "bucket_bytes: 1048576"},
           {"schemes { name: \"r\" compress: \"fp16\" }", "compress: \"fp16\"",
            "compression { fp16 { } }"}}) {
    std::ofstream(path) << "workers: 2\n" << line << "\n";
    const absl::StatusOr<proto::TrainingSpec> spec = Build("train --spec " + path);
    ASSERT_FALSE(spec.ok()) << line;
    EXPECT_EQ(spec.status().message(),
              absl::StrCat(path, ":2: ", old, " is the old spelling; write ", expected));
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace testbed
