// Generated workload traces against the course's closed forms (issue 29):
// DDP's 2(d-1)/d of the parameters per card, ZeRO 1/2/3 at 1.5x / 1x / 1.5x
// DDP, Megatron-LM's four all-reduces of b·s·h per layer and micro-batch,
// a pipeline's boundary activations and 1F1B's warm-up; the trace file's
// round trip and the rules a reader relies on.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "experiments/workload/memory_calculator.h"
#include "experiments/workload/model_cost.h"
#include "experiments/workload/step_simulation.h"
#include "experiments/workload/step_summary.h"
#include "experiments/workload/trace_generator.h"
#include "experiments/workload/workload_trace.h"
#include "allreduce/rank_groups.h"

namespace testbed {
namespace {

using Kind = proto::WorkloadOp::Kind;
using Role = proto::CommunicatorRole::Kind;

// A small transformer: L = 4, h = 64, s = 32, b = 2, V = 1000.
constexpr double kL = 4, kH = 64, kS = 32, kB = 2, kV = 1000;
constexpr double kParameters = kL * (12 * kH * kH + 13 * kH) + (kV + kS) * kH;

proto::Workload Small(int t, int p, int d, int m = 1, int zero = 0,
                      proto::PipelineSchedule::Kind schedule = proto::PipelineSchedule::one_f_one_b) {
  proto::Workload w;
  proto::TransformerModel& model = *w.mutable_transformer();
  model.set_layers(kL);
  model.set_hidden(kH);
  model.set_sequence(kS);
  model.set_micro_batch(kB);
  model.set_vocabulary(kV);
  w.set_dtype(proto::Dtype::float16);
  proto::ParallelStrategy& s = *w.mutable_strategy();
  s.set_tensor_parallel(t);
  s.set_pipeline_parallel(p);
  s.set_data_parallel(d);
  s.set_micro_batches(m);
  s.set_zero_stage(zero);
  s.set_pipeline_schedule(schedule);
  s.set_bucket_bytes(16 << 10);  // several buckets
  return w;
}

proto::WorkloadTrace Generate(const proto::Workload& w) {
  absl::StatusOr<proto::WorkloadTrace> trace = GenerateTrace(w);
  EXPECT_TRUE(trace.ok()) << trace.status();
  EXPECT_TRUE(ValidateTrace(*trace).ok()) << ValidateTrace(*trace);
  return *trace;
}

const TrafficLine* Line(const StepSummary& s, Role role, Kind kind) {
  for (const TrafficLine& line : s.lines) {
    if (line.role == role && line.kind == kind) return &line;
  }
  return nullptr;
}

double Sent(const proto::WorkloadTrace& trace, Role role, Kind kind) {
  const StepSummary summary = SummarizeStep(trace, DefaultTraceAlgorithms());
  const TrafficLine* line = Line(summary, role, kind);
  return line == nullptr ? 0 : line->sent_bytes;
}

void ExpectNear(double actual, double expected, const std::string& what) {
  EXPECT_NEAR(actual, expected, 1e-9 * std::max(1.0, std::abs(expected))) << what;
}

TEST(WorkloadTrace, DdpAllReducesTwiceDMinusOneOverDOfTheParametersPerCard) {
  for (int d = 1; d <= 9; ++d) {
    for (std::uint64_t bucket : {8ull << 10, 100ull << 10, 25ull << 20}) {
      proto::Workload w = Small(1, 1, d);
      w.mutable_strategy()->set_bucket_bytes(bucket);
      const proto::WorkloadTrace trace = Generate(w);
      EXPECT_EQ(trace.parameters(), kParameters);
      const StepSummary s = SummarizeStep(trace, DefaultTraceAlgorithms());
      const TrafficLine* ddp = Line(s, proto::CommunicatorRole::data_parallel,
                                    proto::WorkloadOp::all_reduce);
      const std::string what = absl::StrCat("d = ", d, ", bucket ", bucket);
      if (d == 1) {
        EXPECT_EQ(ddp, nullptr) << what;
        continue;
      }
      ASSERT_NE(ddp, nullptr) << what;
      EXPECT_EQ(ddp->vector_bytes, 2 * kParameters) << what;  // float16
      ExpectNear(ddp->busiest, 2.0 * (d - 1) / d * 2 * kParameters, what);
      ExpectNear(*ddp->closed_form, ddp->busiest, what);
      for (double sent : s.sent_per_rank) ExpectNear(sent, ddp->busiest, what + ": every card");
      // Buckets close once full: all but the last hold at least the cap, and
      // none more than the cap and one layer (a block: 12h^2 + 13h).
      const double largest = 2 * (kV + kS) * kH;
      EXPECT_LE(ddp->ops, std::ceil(2 * kParameters / bucket)) << what;
      EXPECT_GE(ddp->ops, std::floor(2 * kParameters / (bucket + largest))) << what;
      if (bucket > 2 * kParameters) {
        EXPECT_EQ(ddp->ops, 1) << what;
      }
    }
  }
}

TEST(WorkloadTrace, ZeroStagesMoveOneAndAHalfOneAndOneAndAHalfTimesDdp) {
  for (int d : {2, 3, 4, 8}) {
    const auto step = [&](int zero, int m) -> double {
      const proto::WorkloadTrace trace = Generate(Small(1, 1, d, m, zero));
      double sent = 0;
      for (const TrafficLine& line : SummarizeStep(trace, DefaultTraceAlgorithms()).lines) {
        if (line.role == proto::CommunicatorRole::data_parallel) {
          sent += line.sent_bytes;
          EXPECT_TRUE(line.closed_form.has_value());
          ExpectNear(line.busiest, line.closed_form.value_or(-1),
                     absl::StrCat("ZeRO ", zero, ", d ", d));
        }
      }
      return sent;
    };
    const double ddp = step(0, 1);
    ExpectNear(step(1, 1) / ddp, 1.5, "ZeRO 1");
    ExpectNear(step(2, 1) / ddp, 1.0, "ZeRO 2");
    ExpectNear(step(3, 1) / ddp, 1.5, "ZeRO 3");
    // FSDP gathers the weights for every micro-batch's forward and backward.
    ExpectNear(step(3, 3) / ddp, (2 * 3 + 1) / 2.0, "ZeRO 3, m = 3");
    // Gradient accumulation: DDP still reduces once per step.
    ExpectNear(step(0, 3) / ddp, 1.0, "DDP, m = 3");
  }
  // The calculator agrees with what the traces move.
  const std::vector<ZeroStage> stages = ZeroMemory(1, 1);
  EXPECT_EQ(stages[1].traffic_vs_ddp, 1.5);
  EXPECT_EQ(stages[2].traffic_vs_ddp, 1.0);
  EXPECT_EQ(stages[3].traffic_vs_ddp, 1.5);
}

TEST(WorkloadTrace, TensorParallelismAllReducesTheActivationsFourTimesPerLayer) {
  for (int t : {2, 4}) {
    for (int p : {1, 2}) {
      for (int m : {1, 3}) {
        const proto::WorkloadTrace trace = Generate(Small(t, p, 1, m));
        int ops = 0;
        for (const proto::WorkloadOp& op : trace.ops()) {
          if (trace.communicators(op.communicator()).role() !=
              proto::CommunicatorRole::tensor_parallel) {
            continue;
          }
          ++ops;
          EXPECT_EQ(op.kind(), proto::WorkloadOp::all_reduce);
          EXPECT_EQ(op.bytes(), kB * kS * kH * 2);
        }
        EXPECT_EQ(ops, 4 * kL * m) << "t " << t << " p " << p << " m " << m;
        const StepSummary summary = SummarizeStep(trace, DefaultTraceAlgorithms());
        const TrafficLine* line =
            Line(summary, proto::CommunicatorRole::tensor_parallel, proto::WorkloadOp::all_reduce);
        ExpectNear(line->busiest,
                   4.0 * m * (kL / p) * 2.0 * (t - 1) / t * kB * kS * kH * 2, "per card");
      }
    }
  }
}

// Distinct micro-batches a stage computes forward before its first backward.
int WarmUp(const proto::WorkloadTrace& trace, int stage_communicator) {
  std::vector<bool> seen(1024);
  int count = 0;
  for (const proto::WorkloadOp& op : trace.ops()) {
    if (op.kind() != proto::WorkloadOp::compute ||
        static_cast<int>(op.communicator()) != stage_communicator) {
      continue;
    }
    if (op.label().find("backward") != std::string::npos) break;
    if (!seen[op.micro_batch()]) ++count;
    seen[op.micro_batch()] = true;
  }
  return count;
}

TEST(WorkloadTrace, PipelinesHandOnEachMicroBatchsActivationsInTheirScheduleOrder) {
  for (int p : {2, 4}) {
    for (int m : {1, 4, 32}) {
      for (auto schedule : {proto::PipelineSchedule::one_f_one_b, proto::PipelineSchedule::gpipe}) {
        const proto::WorkloadTrace trace = Generate(Small(1, p, 2, m, 1, schedule));
        int sends = 0;
        for (const proto::WorkloadOp& op : trace.ops()) {
          if (op.kind() != proto::WorkloadOp::send_recv) continue;
          ++sends;
          EXPECT_EQ(op.bytes(), kB * kS * kH * 2);
        }
        EXPECT_EQ(sends, 2 * (p - 1) * m);
        for (int c = 0; c < trace.communicators_size(); ++c) {
          if (trace.communicators(c).role() != proto::CommunicatorRole::stage) continue;
          const int stage = static_cast<int>(trace.communicators(c).groups(0).ranks(0)) / 2;
          const int expected =
              schedule == proto::PipelineSchedule::gpipe ? m : std::min(p - stage, m);
          EXPECT_EQ(WarmUp(trace, c), expected) << "p " << p << " m " << m << " stage " << stage;
        }
        const StepSummary s = SummarizeStep(trace, DefaultTraceAlgorithms());
        ASSERT_TRUE(s.bubble.has_value());
        EXPECT_DOUBLE_EQ(s.bubble->bubble_fraction, (p - 1.0) / (m + p - 1.0));
      }
    }
  }
}

TEST(WorkloadTrace, EveryRankSendsItsClosedFormsAcrossStrategies) {
  for (int t : {1, 2}) {
    for (int p : {1, 2, 3}) {
      for (int d : {1, 2, 3}) {
        for (int zero : {0, 1, 2, 3}) {
          for (int m : {1, 4}) {
            if (zero >= 2 && p > 1) continue;
            const proto::WorkloadTrace trace = Generate(Small(t, p, d, m, zero));
            const StepSummary s = SummarizeStep(trace, DefaultTraceAlgorithms());
            for (int r = 0; r < t * p * d; ++r) {
              double expected = 0, flops = 0;
              for (const TrafficLine& line : s.lines) {
                const std::optional<double> form = CourseBytes(trace, r, line.role, line.kind);
                ASSERT_TRUE(form.has_value());
                (line.kind == proto::WorkloadOp::compute ? flops : expected) += *form;
              }
              const std::string what =
                  absl::StrCat("t ", t, " p ", p, " d ", d, " ZeRO ", zero, " m ", m, " rank ", r);
              ExpectNear(s.sent_per_rank[r], expected, what);
              ExpectNear(s.flops_per_rank[r], flops, what + " FLOPs");
            }
          }
        }
      }
    }
  }
}

TEST(WorkloadTrace, PresetsAndTheMlp) {
  absl::StatusOr<proto::Workload> gpt2 = PresetModel("gpt2");
  ASSERT_TRUE(gpt2.ok());
  EXPECT_EQ(Generate(*gpt2).parameters(), 124'438'272);  // GPT-2 small, tied embeddings
  absl::StatusOr<proto::Workload> mlp = PresetModel("mlp");
  ASSERT_TRUE(mlp.ok());
  mlp->mutable_strategy()->set_data_parallel(4);
  const proto::WorkloadTrace trace = Generate(*mlp);
  const double parameters = 784 * 128 + 128 + 128 * 10 + 10;
  EXPECT_EQ(trace.parameters(), parameters);
  ExpectNear(Sent(trace, proto::CommunicatorRole::data_parallel, proto::WorkloadOp::all_reduce),
             4 * 2.0 * 3 / 4 * parameters * 4, "float32 MLP, d = 4");
  EXPECT_FALSE(PresetModel("gpt5").ok());
}

TEST(WorkloadTrace, RefusesWhatNoRunCouldDo) {
  const auto refusal = [](const proto::Workload& w) {
    absl::StatusOr<proto::WorkloadTrace> trace = GenerateTrace(w);
    return trace.ok() ? std::string("accepted") : std::string(trace.status().message());
  };
  EXPECT_NE(refusal(Small(1, 2, 2, 4, 2)).find("DeepSpeed"), std::string::npos);
  EXPECT_NE(refusal(Small(3, 1, 1)).find("must divide the hidden size 64"), std::string::npos);
  EXPECT_NE(refusal(Small(1, 5, 1)).find("p = 5 stages"), std::string::npos);
  EXPECT_NE(refusal(Small(1, 1, 1, 1, 4)).find("ZeRO stages are 0"), std::string::npos);
  EXPECT_NE(refusal(Small(1, 1, 9000)).find("at most"), std::string::npos);
  absl::StatusOr<proto::Workload> mlp = PresetModel("mlp");
  mlp->mutable_strategy()->set_tensor_parallel(2);
  EXPECT_NE(refusal(*mlp).find("the MLP takes t = 1"), std::string::npos);
  EXPECT_NE(refusal(proto::Workload()).find("no model"), std::string::npos);
}

TEST(WorkloadTraceFile, RoundTripsAndRefusesBrokenTraces) {
  const proto::WorkloadTrace trace = Generate(Small(2, 2, 2, 2, 1));
  const std::string json = TraceJson(trace);
  EXPECT_NE(json.find("\"world_size\": 8"), std::string::npos);
  absl::StatusOr<proto::WorkloadTrace> back = ParseTraceJson(json, "step.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), trace.SerializeAsString());

  const auto broken = [&](auto change) {
    proto::WorkloadTrace copy = trace;
    change(copy);
    const absl::Status st = ValidateTrace(copy);
    return st.ok() ? std::string("valid") : std::string(st.message());
  };
  EXPECT_NE(broken([](auto& t) { t.set_version(2); }).find("version 2"), std::string::npos);
  EXPECT_NE(broken([](auto& t) { t.mutable_ops(3)->add_deps(7); }).find("not an earlier"),
            std::string::npos);
  EXPECT_NE(broken([](auto& t) { t.mutable_communicators(0)->mutable_groups(0)->set_ranks(1, 8); })
                .find("outside the world"),
            std::string::npos);
  EXPECT_NE(broken([](auto& t) { t.mutable_communicators(0)->mutable_groups(0)->set_ranks(1, 0); })
                .find("in two of its groups"),
            std::string::npos);
  EXPECT_NE(broken([](auto& t) {
              for (auto& op : *t.mutable_ops()) {
                if (op.kind() != proto::WorkloadOp::compute) {
                  op.set_bytes(3);
                  break;
                }
              }
            }).find("whole number of 2-byte"),
            std::string::npos);
  EXPECT_NE(broken([](auto& t) { t.mutable_ops(0)->set_communicator(999); })
                .find("no communicator 999"),
            std::string::npos);
  EXPECT_FALSE(ParseTraceJson("{\"version\": 1, \"wrold_size\": 2}", "typo.json").ok());
}

}  // namespace
}  // namespace testbed

namespace testbed {
namespace {

// N hosts on links of `bps`, in `racks` racks behind uplinks of `uplink_bps`
// (0: the flat switch), placed packed or round-robin; no latency.
SimSetup Fabric(int n, double bps, int racks = 1, double uplink_bps = 0, bool round_robin = false) {
  SimSetup setup;
  if (racks > 1) {
    const std::vector<int> sizes(static_cast<std::size_t>(racks), n / racks);
    setup.placement = round_robin ? Placement::RoundRobin(sizes) : Placement::Packed(sizes);
    setup.rates.uplink_bps.assign(static_cast<std::size_t>(racks), uplink_bps);
  }
  setup.rates.host_bps.assign(static_cast<std::size_t>(n), bps);
  return setup;
}

StepSimulation Replay(const proto::Workload& w, const SimSetup& setup, double flops_per_s) {
  absl::StatusOr<StepSimulation> sim =
      SimulateStep(Generate(w), DefaultTraceAlgorithms(), setup, flops_per_s);
  EXPECT_TRUE(sim.ok()) << sim.status();
  return sim.value_or(StepSimulation{});
}

TEST(WorkloadReplay, APipelineWithFreeLinksIdlesForItsBubble) {
  for (int m : {1, 4, 8, 32}) {
    for (auto schedule : {proto::PipelineSchedule::one_f_one_b, proto::PipelineSchedule::gpipe}) {
      proto::Workload w = Small(1, 4, 1, m, 0, schedule);
      w.mutable_transformer()->set_vocabulary(1);  // stages of equal compute, near enough
      const StepSimulation sim = Replay(w, Fabric(4, 1e18), 1e12);
      const RankStep& r = sim.ranks[0];
      const double bubble = 3.0 / (m + 3.0);
      EXPECT_NEAR(r.idle(sim.step_s) / sim.step_s, bubble, 0.01 * bubble + 1e-3)
          << "m " << m << (schedule == proto::PipelineSchedule::gpipe ? " GPipe" : " 1F1B");
      EXPECT_NEAR(r.compute_s * (m + 3.0) / m, sim.step_s, 0.01 * sim.step_s);
    }
  }
}

TEST(WorkloadReplay, DdpHidesItsBucketsBehindTheBackward) {
  // 1 Gbit/s: the gradients (2·kParameters bytes) take about as long as the compute.
  const proto::Workload w = Small(1, 1, 4, 1, 0);
  const SimSetup setup = Fabric(4, 1e9);
  const double flops = 3 * 3.2e6 * 2;  // roughly the step's forward FLOPs, tripled, per second
  const StepSimulation sim = Replay(w, setup, flops);
  const RankStep& r = sim.ranks[sim.critical_rank];
  EXPECT_GT(r.overlap_s, 0.05 * r.communication_s) << "buckets reduce during the backward";
  EXPECT_LT(sim.step_s, r.compute_s + r.communication_s);
  EXPECT_NEAR(sim.step_s, r.compute_s + r.exposed_s() + r.idle(sim.step_s), 1e-9);
  // One bucket of everything: nothing to overlap, the all-reduce after the backward.
  proto::Workload one_bucket = w;
  one_bucket.mutable_strategy()->set_bucket_bytes(1 << 30);
  const StepSimulation serial = Replay(one_bucket, setup, flops);
  EXPECT_GT(serial.step_s, sim.step_s);
}

TEST(WorkloadReplay, TensorParallelismAcrossAnOversubscribedRackBoundaryIsSlower) {
  // t = 4, d = 2 on two racks of 4 behind 4:1 uplinks: packed, every tensor-
  // parallel group sits in its rack (and the data-parallel pairs span both);
  // round-robin, the other way round. Micro-batches of 64 samples: the
  // activations (16 all-reduces of 256 KiB) outweigh the gradients (160 KiB).
  proto::Workload w = Small(4, 1, 2);
  w.mutable_transformer()->set_micro_batch(64);
  const double bps = 10e9, uplink = 4 * bps / 4;
  const StepSimulation inside = Replay(w, Fabric(8, bps, 2, uplink), 1e14);
  const StepSimulation across = Replay(w, Fabric(8, bps, 2, uplink, true), 1e14);
  EXPECT_GT(across.step_s, 1.5 * inside.step_s);
  EXPECT_NEAR(inside.ranks[0].compute_s, across.ranks[0].compute_s, 1e-9 * inside.step_s);
}

// The replay before operations shared links: each collective simulated
// alone, all of its communicator's groups at once, and its time reused.
absl::StatusOr<StepSimulation> ReplayAlone(const proto::WorkloadTrace& trace, const SimSetup& world,
                                           double flops_per_s) {
  const TraceAlgorithms algorithms = DefaultTraceAlgorithms();
  const int n = static_cast<int>(trace.world_size());
  const CollectiveTime alone = [&](const proto::WorkloadOp& op,
                                   const proto::Communicator& c) -> absl::StatusOr<double> {
    SimSetup setup = world;
    setup.groups = *CommunicatorGroups(c, n);
    const bool pair = op.kind() == proto::WorkloadOp::send_recv;
    const int root = pair && c.groups(0).ranks(0) > c.groups(0).ranks(1) ? 1 : 0;
    absl::StatusOr<SimResult> sim =
        SimulateSchedule(*AlgorithmOf(algorithms, op.kind()), n,
                         static_cast<std::int64_t>(op.bytes()), TraceElementBytes(trace), setup, root);
    if (!sim.ok()) return sim.status();
    double longest = 0;
    for (const SimRank& r : sim->ranks) longest = std::max(longest, r.time_s);
    return longest;
  };
  return ReplayStep(trace, alone, flops_per_s);
}

TEST(WorkloadReplay, OperationsThatOverlapShareTheLinks) {
  // t = 2, p = 2, d = 2 on 4 racks of 2 behind 2:1 uplinks. Round-robin puts
  // one rank of each stage in every rack, so a stage's tensor-parallel pairs
  // alone cross their uplinks at full rate - as fast as packed, inside the
  // racks - but the two stages' all-reduces, at once in 1F1B's steady state,
  // share every uplink. Timed alone, as the replay did before, the placement
  // costs the tensor-parallel all-reduces nothing.
  proto::Workload w = Small(2, 2, 2, 8);
  w.mutable_transformer()->set_micro_batch(64);
  const proto::WorkloadTrace trace = Generate(w);
  const double bps = 10e9, uplink = 2 * bps / 2;
  const double flops = 1e14;
  const SimSetup packed = Fabric(8, bps, 4, uplink), spread = Fabric(8, bps, 4, uplink, true);
  const auto tensor_parallel = [&](const StepSimulation& sim) {
    double sum = 0;
    for (int i = 0; i < trace.ops_size(); ++i) {
      const proto::Communicator& c = trace.communicators(static_cast<int>(trace.ops(i).communicator()));
      if (c.role() == proto::CommunicatorRole::tensor_parallel) sum += sim.ops[i].end_s - sim.ops[i].start_s;
    }
    return sum;
  };
  const StepSimulation inside_alone = *ReplayAlone(trace, packed, flops);
  const StepSimulation across_alone = *ReplayAlone(trace, spread, flops);
  EXPECT_NEAR(tensor_parallel(across_alone), tensor_parallel(inside_alone),
              1e-9 * tensor_parallel(inside_alone));
  absl::StatusOr<StepSimulation> inside = SimulateStep(trace, DefaultTraceAlgorithms(), packed, flops);
  absl::StatusOr<StepSimulation> across = SimulateStep(trace, DefaultTraceAlgorithms(), spread, flops);
  ASSERT_TRUE(inside.ok() && across.ok());
  EXPECT_GT(tensor_parallel(*across), 1.3 * tensor_parallel(*inside));
  EXPECT_GT(across->step_s, 1.2 * inside->step_s);
  // Sharing never makes an operation faster than alone.
  EXPECT_GE(inside->step_s, inside_alone.step_s * (1 - 1e-9));
  EXPECT_GE(across->step_s, across_alone.step_s * (1 - 1e-9));
}

TEST(WorkloadReplay, OperationsThatNeverOverlapTakeWhatTheyTakeAlone) {
  // DDP on one communicator, and a pipeline of one micro-batch: nothing runs
  // beside anything else on the links. (With more micro-batches, 1F1B's
  // stages send activations on and gradients back at once, both up their
  // host links: those do share.)
  for (const proto::Workload& w : {Small(1, 1, 4), Small(1, 4, 1, 1)}) {
    const proto::WorkloadTrace trace = Generate(w);
    const SimSetup setup = Fabric(4, 1e9);
    const StepSimulation alone = *ReplayAlone(trace, setup, 1e12);
    absl::StatusOr<StepSimulation> shared = SimulateStep(trace, DefaultTraceAlgorithms(), setup, 1e12);
    ASSERT_TRUE(shared.ok()) << shared.status();
    EXPECT_NEAR(shared->step_s, alone.step_s, 1e-9 * alone.step_s);
    for (int i = 0; i < trace.ops_size(); ++i) {
      EXPECT_NEAR(shared->ops[i].end_s, alone.ops[i].end_s, 1e-9 * alone.step_s) << i;
    }
  }
}

TEST(WorkloadReplay, RefusesAFabricOfAnotherSize) {
  const absl::StatusOr<StepSimulation> sim =
      SimulateStep(Generate(Small(1, 1, 4)), DefaultTraceAlgorithms(), Fabric(3, 1e9), 1e12);
  ASSERT_FALSE(sim.ok());
  EXPECT_NE(sim.status().message().find("3 hosts for 4 ranks"), std::string::npos);
}

}  // namespace
}  // namespace testbed
