// Timelines of replayed steps (experiments/results/step_timeline.h): every
// operation is a span on each of its ranks' tracks, at the replay's start and
// end; no track's spans overlap, since each track is one stream; a pipeline's
// hand-off carries its peer and vector on both ends; the critical rank is
// named; the command writes trace JSON Perfetto reads and refuses what it
// cannot draw before anything runs.
#include <map>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "experiments/results/step_timeline.h"
#include "experiments/workload/step_simulation.h"
#include "experiments/workload/trace_generator.h"
#include "proto/enum_text.h"
#include "tests/process_runner.h"

namespace testbed {
namespace {

using ::testing::HasSubstr;
using testing::ReadFile;
using testing::RunCli;
using testing::TempDir;

// A small transformer on t = 2, p = 2, d = 2 with 4 micro-batches: every
// kind of communicator and operation.
proto::WorkloadTrace ThreeD() {
  proto::Workload w;
  proto::TransformerModel& model = *w.mutable_transformer();
  model.set_layers(4);
  model.set_hidden(64);
  model.set_sequence(32);
  model.set_micro_batch(2);
  model.set_vocabulary(1000);
  w.set_dtype(proto::Dtype::float16);
  proto::ParallelStrategy& s = *w.mutable_strategy();
  s.set_tensor_parallel(2);
  s.set_pipeline_parallel(2);
  s.set_data_parallel(2);
  s.set_micro_batches(4);
  s.set_zero_stage(1);
  absl::StatusOr<proto::WorkloadTrace> trace = GenerateTrace(w);
  EXPECT_TRUE(trace.ok()) << trace.status();
  return trace.value_or(proto::WorkloadTrace{});
}

StepSimulation Simulated(const proto::WorkloadTrace& trace) {
  SimSetup setup;
  setup.rates.host_bps.assign(trace.world_size(), 1e9);
  absl::StatusOr<StepSimulation> sim =
      SimulateStep(trace, DefaultTraceAlgorithms(), setup, 1e12);
  EXPECT_TRUE(sim.ok()) << sim.status();
  return sim.value_or(StepSimulation{});
}

TEST(StepTimelineTest, EveryOperationIsASpanOnEachOfItsRanksAtItsReplayedTimes) {
  const proto::WorkloadTrace trace = ThreeD();
  const StepSimulation sim = Simulated(trace);
  const TimelineRow row = StepTimeline(trace, DefaultTraceAlgorithms(), sim, "step");
  ASSERT_EQ(row.track_names.size(), row.ranks.size());
  // Spans by (name, start): how many ranks show each.
  std::map<std::pair<std::string, double>, int> shown;
  for (const std::vector<TimelineSpan>& track : row.ranks) {
    ASSERT_FALSE(track.empty());
    for (std::size_t i = 0; i < track.size(); ++i) {
      EXPECT_LE(track[i].start_us, track[i].end_us);
      if (i > 0) {
        EXPECT_LE(track[i - 1].end_us, track[i].start_us + 1e-6) << track[i].name;
      }
      ++shown[{track[i].name, track[i].start_us}];
    }
  }
  std::size_t spans = 0;
  for (const auto& track : row.ranks) spans += track.size();
  std::size_t expected = 0;
  for (int i = 0; i < trace.ops_size(); ++i) {
    const proto::WorkloadOp& op = trace.ops(i);
    const proto::Communicator& c = trace.communicators(static_cast<int>(op.communicator()));
    for (const proto::RankGroup& g : c.groups()) expected += static_cast<std::size_t>(g.ranks_size());
    const std::string name =
        op.label().empty() ? EnumText(op.kind()) : EnumText(op.kind()) + ": " + op.label();
    const std::pair<std::string, double> key{name, sim.ops[i].start_s * 1e6};
    EXPECT_GE(shown[key], 1) << name;
  }
  EXPECT_EQ(spans, expected);
  const double last = [&] {
    double end = 0;
    for (const auto& track : row.ranks) end = std::max(end, track.back().end_us);
    return end;
  }();
  EXPECT_DOUBLE_EQ(last, sim.step_s * 1e6);
}

TEST(StepTimelineTest, TracksAreEachRanksComputeAndCommunicatorsAndTheCriticalOneIsNamed) {
  const proto::WorkloadTrace trace = ThreeD();
  const StepSimulation sim = Simulated(trace);
  const TimelineRow row = StepTimeline(trace, DefaultTraceAlgorithms(), sim, "step");
  EXPECT_EQ(row.track_names.front().rfind("rank 0 compute", 0), 0u) << row.track_names.front();
  int critical = 0;
  for (const std::string& name : row.track_names) {
    if (name.ends_with("(critical)")) {
      ++critical;
      EXPECT_EQ(name.rfind("rank " + std::to_string(sim.critical_rank) + " ", 0), 0u) << name;
    }
  }
  // Its compute, its tensor-parallel and data-parallel groups, and a pipeline's hand-offs.
  EXPECT_GE(critical, 4);
}

TEST(StepTimelineTest, AHandOffCarriesItsPeerAndVectorOnBothEnds) {
  const proto::WorkloadTrace trace = ThreeD();
  const TimelineRow row = StepTimeline(trace, DefaultTraceAlgorithms(), Simulated(trace), "step");
  int sends = 0, receives = 0;
  for (std::size_t t = 0; t < row.ranks.size(); ++t) {
    const int rank = std::stoi(row.track_names[t].substr(5));
    for (const TimelineSpan& span : row.ranks[t]) {
      if (span.name.rfind("send-recv", 0) != 0) continue;
      ASSERT_GE(span.peer, 0);
      EXPECT_NE(span.peer, rank);
      // Stages are t * d = 4 ranks apart.
      EXPECT_EQ(std::abs(span.peer - rank), 4) << span.name;
      EXPECT_EQ(span.bytes_sent + span.bytes_received, 2 * 32 * 64 * 2) << span.name;  // b s h fp16
      (span.bytes_sent > 0 ? sends : receives) += 1;
    }
  }
  EXPECT_GT(sends, 0);
  EXPECT_EQ(sends, receives);
}

TEST(StepTimelineTest, TheCommandWritesTraceJsonAndRefusesWhatItCannotDraw) {
  const std::string dir = TempDir("step-timeline");
  const std::string path = dir + "/step.json";
  const auto [code, out] = RunCli(
      "workload --model gpt2 --tp 2 --pp 2 --dp 2 --micro-batches 4 --racks 2 --simulate "
      "--link-rate 10gbit --device-tflops 100 --timeline " + path);
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("timeline of the simulated step written to " + path));
  google::protobuf::Struct json;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ReadFile(path), &json).ok());
  int spans = 0;
  for (const auto& event : json.fields().at("traceEvents").list_value().values()) {
    if (event.struct_value().fields().at("ph").string_value() == "X") ++spans;
  }
  EXPECT_GT(spans, 100);

  const auto [no_replay, why] = RunCli("workload --model gpt2 --dp 2 --timeline " + path);
  EXPECT_EQ(no_replay, 2) << why;
  EXPECT_THAT(why, HasSubstr("add --simulate or --run"));
  const auto [too_big, big] = RunCli(
      "workload --model gpt2 --dp 512 --run --device-tflops 100 --timeline " + path);
  EXPECT_EQ(too_big, 2) << big;
  EXPECT_THAT(big, HasSubstr("records up to 256 ranks"));
}

}  // namespace
}  // namespace testbed
