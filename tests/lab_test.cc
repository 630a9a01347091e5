// The lab's handlers without a socket or a browser: the course's memory
// figures, the trace JSON against the executor's run, bad input as a 400 with
// one line, and the run queue over a fake executor.
#include <chrono>
#include <cmath>
#include <thread>

#include <httplib.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "allreduce/collective.h"
#include "experiments/lab/lab_api.h"
#include "experiments/lab/lab_assets.h"
#include "experiments/lab/lab_memory.h"
#include "experiments/lab/lab_runner.h"
#include "experiments/lab/lab_server.h"

namespace testbed {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

Value Parse(const std::string& json) {
  Value value;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &value);
  EXPECT_TRUE(status.ok()) << status.ToString() << " in " << json;
  return value;
}

const Value& Field(const Value& object, const std::string& name) {
  return object.struct_value().fields().at(name);
}

double RoundToTenth(double gb) { return std::round(gb * 10) / 10; }

std::vector<double> StageGigabytes(double parameters, int gpus) {
  std::vector<double> gb;
  for (const ZeroStage& stage : ZeroMemory(parameters, gpus)) {
    gb.push_back(RoundToTenth(stage.bytes_per_gpu / 1e9));
  }
  return gb;
}

TEST(LabMemory, SevenBillionOnEightGpusIsTheCourseFigures) {
  EXPECT_EQ(StageGigabytes(7e9, 8), (std::vector<double>{112, 38.5, 26.3, 14}));
}

TEST(LabMemory, NotesTableSevenAndAHalfBillionOnSixtyFour) {
  EXPECT_EQ(StageGigabytes(7.5e9, 64), (std::vector<double>{120, 31.4, 16.6, 1.9}));
}

TEST(LabMemory, StagesOneAndThreeCostHalfAgainDdpTraffic) {
  const std::vector<ZeroStage> stages = ZeroMemory(7e9, 8);
  EXPECT_EQ(stages[1].traffic_vs_ddp, 1.5);
  EXPECT_EQ(stages[2].traffic_vs_ddp, 1.0);
  EXPECT_EQ(stages[3].traffic_vs_ddp, 1.5);
}

TEST(LabMemory, PipelineBubble) {
  const PipelineBubble bubble = PipelineBubbleOf(4, 8);
  EXPECT_DOUBLE_EQ(bubble.bubble_fraction, 3.0 / 11.0);
  EXPECT_EQ(bubble.gpipe_activations, 8);
  EXPECT_EQ(bubble.one_f_one_b_activations, 4);
  EXPECT_DOUBLE_EQ(PipelineBubbleOf(1, 5).bubble_fraction, 0.0);
}

TEST(LabApi, MemoryJsonCarriesTheStages) {
  const LabResponse response = MemoryResponse({{"params", "7e9"}, {"gpus", "8"}});
  ASSERT_EQ(response.status, 200) << response.body;
  const Value memory = Parse(response.body);
  const auto& zero = Field(memory, "zero").list_value().values();
  ASSERT_EQ(zero.size(), 4);
  EXPECT_DOUBLE_EQ(Field(zero[0], "gb_per_gpu").number_value(), 112);
  EXPECT_DOUBLE_EQ(Field(zero[1], "gb_per_gpu").number_value(), 38.5);
}

TEST(LabApi, CollectivesComeFromTheRegistry) {
  const Value list = Parse(CollectivesResponse().body);
  ASSERT_EQ(list.list_value().values_size(), static_cast<int>(AllCollectives().size()));
  for (std::size_t i = 0; i < AllCollectives().size(); ++i) {
    const Value& entry = list.list_value().values(static_cast<int>(i));
    EXPECT_EQ(Field(entry, "name").string_value(), AllCollectives()[i].name);
    // Scheduled ones from the executor, the parameter server from its protocol.
    EXPECT_TRUE(Field(entry, "traceable").bool_value()) << AllCollectives()[i].name;
    EXPECT_EQ(Field(entry, "parameter_server").bool_value(),
              AllCollectives()[i].runs_on_parameter_server());
  }
}

int Popcount(double mask) { return __builtin_popcountll(static_cast<unsigned long long>(mask)); }

TEST(LabApi, RingTraceEndsWithEveryBlockHoldingEveryRank) {
  const LabResponse response = TraceResponse({{"collective", "ring"}, {"n", "4"}, {"count", "8"}});
  ASSERT_EQ(response.status, 200) << response.body;
  const Value trace = Parse(response.body);
  const auto& rounds = Field(trace, "rounds").list_value().values();
  ASSERT_EQ(rounds.size(), 6);  // 2(N-1)
  EXPECT_EQ(Field(rounds[0], "phase").string_value(), "reduce-scatter");
  // Before round 0 each rank holds only itself; after reduce-scatter's N-1
  // rounds rank r's own chunk holds all four; at the end every block does.
  for (const Value& rank : Field(trace, "initial").list_value().values()) {
    for (const Value& mask : rank.list_value().values()) EXPECT_EQ(Popcount(mask.number_value()), 1);
  }
  for (const Value& rank : Field(rounds[5], "buffers").list_value().values()) {
    for (const Value& mask : rank.list_value().values()) EXPECT_EQ(mask.number_value(), 15);
  }
  EXPECT_EQ(Field(rounds[0], "messages").list_value().values_size(), 4);  // one per rank
  EXPECT_EQ(Field(rounds[5], "bytes_so_far").number_value(),
            Field(trace, "formula_bytes").number_value());
}

// One line, ending in a newline, mentioning `what`.
void ExpectBadRequest(const LabResponse& response, const std::string& what) {
  EXPECT_EQ(response.status, 400) << response.body;
  ASSERT_FALSE(response.body.empty());
  EXPECT_EQ(response.body.find('\n'), response.body.size() - 1) << response.body;
  EXPECT_NE(response.body.find(what), std::string::npos) << response.body;
}

TEST(LabApi, BadTraceInputIsOneLineAndA400) {
  ExpectBadRequest(TraceResponse({{"n", "0"}}), "n must be 1..16");
  ExpectBadRequest(TraceResponse({{"n", "17"}}), "n must be 1..16");
  ExpectBadRequest(TraceResponse({{"n", "four"}}), "whole number");
  ExpectBadRequest(TraceResponse({{"n", "4x"}}), "whole number");
  ExpectBadRequest(TraceResponse({{"count", "0"}}), "count must be");
  ExpectBadRequest(TraceResponse({{"collective", "nope"}}), "unknown collective 'nope'");
  ExpectBadRequest(TraceResponse({{"collective", "ps"}, {"n", "4"}, {"servers", "5"}}),
                   "servers must be 1..4 (n), not 5");
  ExpectBadRequest(TraceResponse({{"collective", "ps"}, {"servers", "0"}}), "servers must be 1..");
  ExpectBadRequest(TraceResponse({{"collective", "ps"}, {"servers", "two"}}), "whole number");
}

Value PsTrace(int n, int servers, int count) {
  const LabResponse response =
      TraceResponse({{"collective", "ps"}, {"n", absl::StrCat(n)},
                     {"servers", absl::StrCat(servers)}, {"count", absl::StrCat(count)}});
  EXPECT_EQ(response.status, 200) << response.body;
  return Parse(response.body);
}

std::vector<int> HoldsOf(const Value& node) {
  std::vector<int> holds;
  for (const Value& mask : node.list_value().values()) {
    holds.push_back(Popcount(mask.number_value()));
  }
  return holds;
}

// Node `i` of a round's (or the initial) buffers, as ranks held per element.
std::vector<int> Holds(const Value& buffers, int i) {
  return HoldsOf(buffers.list_value().values(i));
}

TEST(LabApi, PsTraceOneShardPushesThenPullsAndMovesTwoNM) {
  const Value trace = PsTrace(4, 1, 8);
  EXPECT_EQ(Field(trace, "source").string_value(), "protocol");
  EXPECT_NE(Field(trace, "note").string_value().find("not recorded from a run"), std::string::npos);
  EXPECT_EQ(Field(trace, "servers").number_value(), 1);
  const auto& rounds = Field(trace, "rounds").list_value().values();
  ASSERT_EQ(rounds.size(), 2);
  EXPECT_EQ(Field(rounds[0], "phase").string_value(), "push");
  EXPECT_EQ(Field(rounds[1], "phase").string_value(), "pull");
  const auto& push = Field(rounds[0], "messages").list_value().values();
  ASSERT_EQ(push.size(), 4);  // every worker to the one shard, node 4
  for (const Value& m : push) {
    EXPECT_EQ(Field(m, "to").number_value(), 4);
    EXPECT_EQ(Field(m, "count").number_value(), 8);
    EXPECT_EQ(Field(m, "action").string_value(), "reduce");
  }
  EXPECT_EQ(Field(rounds[1], "messages").list_value().values_size(), 4);
  // M = 8 float64 = 64 bytes: N*M pushed, N*M pulled: the registry's 2NM.
  EXPECT_EQ(Field(rounds[0], "bytes_so_far").number_value(), 4 * 64);
  EXPECT_EQ(Field(rounds[1], "bytes_so_far").number_value(),
            FindCollective("ps")->formula_bytes(4, 64));
  const std::vector<int> none(8, 0), own(8, 1), all(8, 4);
  const Value& initial = Field(trace, "initial");
  ASSERT_EQ(initial.list_value().values_size(), 5);  // 4 workers, then the shard
  for (int w = 0; w < 4; ++w) EXPECT_EQ(Holds(initial, w), own) << "worker " << w;
  EXPECT_EQ(Holds(initial, 4), none);
  for (int w = 0; w < 4; ++w) EXPECT_EQ(Holds(Field(rounds[0], "buffers"), w), own);
  EXPECT_EQ(Holds(Field(rounds[0], "buffers"), 4), all);  // the shard holds the sum
  for (int node = 0; node < 5; ++node) EXPECT_EQ(Holds(Field(rounds[1], "buffers"), node), all);
}

TEST(LabApi, PsTraceTwoShardsEachTakeTheirSlice) {
  const Value trace = PsTrace(4, 2, 8);
  const auto& slices = Field(trace, "server_slices").list_value().values();
  ASSERT_EQ(slices.size(), 2);
  EXPECT_EQ(slices[0].list_value().values(1).number_value(), 4);  // [0,4) and [4,8)
  const auto& rounds = Field(trace, "rounds").list_value().values();
  ASSERT_EQ(rounds.size(), 2);
  for (const Value& round : rounds) {
    EXPECT_EQ(Field(round, "messages").list_value().values_size(), 8);  // N*S
    for (const Value& m : Field(round, "messages").list_value().values()) {
      EXPECT_EQ(Field(m, "count").number_value(), 4);
    }
  }
  EXPECT_EQ(Holds(Field(rounds[0], "buffers"), 4), (std::vector<int>{4, 4, 4, 4, 0, 0, 0, 0}));
  EXPECT_EQ(Holds(Field(rounds[0], "buffers"), 5), (std::vector<int>{0, 0, 0, 0, 4, 4, 4, 4}));
  EXPECT_EQ(Holds(Field(rounds[0], "buffers"), 0), std::vector<int>(8, 1));
  EXPECT_EQ(Holds(Field(rounds[1], "buffers"), 0), std::vector<int>(8, 4));
  EXPECT_EQ(Field(rounds[1], "bytes_so_far").number_value(),
            FindCollective("ps")->formula_bytes(4, 64));
}

// Uneven slices, a shard with none (S > count), N = 1: still exactly 2NM.
TEST(LabApi, PsTraceBytesMeetTheClosedFormForAnyShardsAndCount) {
  for (int n : {1, 3, 4, 5}) {
    for (int servers = 1; servers <= n; ++servers) {
      for (int count : {1, 7, 8}) {
        const Value trace = PsTrace(n, servers, count);
        const auto& rounds = Field(trace, "rounds").list_value().values();
        ASSERT_EQ(rounds.size(), 2);
        EXPECT_EQ(Field(rounds[1], "bytes_so_far").number_value(),
                  FindCollective("ps")->formula_bytes(n, count * 8))
            << "n " << n << ", servers " << servers << ", count " << count;
        for (int w = 0; w < n; ++w) {
          EXPECT_EQ(Holds(Field(rounds[1], "buffers"), w), std::vector<int>(count, n));
        }
      }
    }
  }
}

TEST(LabApi, BadMemoryAndModelInputIsA400) {
  ExpectBadRequest(MemoryResponse({{"params", "lots"}}), "params must be a number");
  ExpectBadRequest(MemoryResponse({{"gpus", "0"}}), "gpus must be");
  ExpectBadRequest(ModelResponse({{"collective", "ring"}, {"n", "4"}, {"bytes", "4KiB"},
                                  {"alpha_us", "nan"}}),
                   "alpha_us must be a number");
  ExpectBadRequest(ModelResponse({{"collective", "ring"}, {"n", "4"}}), "bytes is missing");
}

TEST(LabApi, ModelIsTheAlphaBetaModel) {
  const LabResponse response = ModelResponse(
      {{"collective", "ring"}, {"n", "4"}, {"bytes", "4096"}, {"alpha_us", "50"},
       {"rate_gbit", "8"}});
  ASSERT_EQ(response.status, 200) << response.body;
  const Value model = Parse(response.body);
  EXPECT_EQ(Field(model, "rounds").number_value(), 6);
  EXPECT_EQ(Field(model, "formula_bytes").number_value(), 2 * 3 * 4096);
  // Each round moves a quarter of the vector over the busiest link: 1024
  // bytes at 1 byte/ns, plus alpha.
  EXPECT_NEAR(Field(model, "time_us").number_value(), 6 * (50 + 1.024), 1e-6);
}

proto::ResultRow FakeRow(const proto::ExperimentSpec& spec) {
  proto::ResultRow row;
  row.set_algorithm(spec.algorithms(0));
  row.set_workers(spec.workers());
  row.set_bytes(spec.sizes(0));
  row.set_iterations(spec.iterations());
  row.set_time_us_avg(100);
  row.set_rounds(6);
  row.set_dtype("float32");
  row.set_transport("fake");
  return row;
}

// Every spec "runs" at once; naive fails the way a lost worker fails a run.
absl::Status FakeExecutor(const proto::ExperimentSpec& spec,
                          const std::function<void(const proto::ResultRow&)>& on_row,
                          std::ostream& progress) {
  progress << "started " << spec.workers() << " workers\n";
  if (spec.algorithms(0) == "naive") return absl::UnavailableError("worker 2 was lost");
  on_row(FakeRow(spec));
  progress << "done";
  return absl::OkStatus();
}

LabRun WaitForEnd(const LabRunner& runner, int id) {
  for (int i = 0; i < 500; ++i) {
    std::optional<LabRun> run = runner.Get(id);
    if (run && (run->state == RunState::kDone || run->state == RunState::kFailed)) return *run;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "run " << id << " did not end";
  return {};
}

TEST(LabRunner, RunsQueueOneAtATimeAndKeepRowsProgressAndErrors) {
  LabRunner runner(&FakeExecutor);
  const LabResponse first =
      SubmitRunResponse({{"collective", "ring"}, {"n", "4"}, {"bytes", "4KiB"}}, 8, runner);
  ASSERT_EQ(first.status, 202) << first.body;
  const LabResponse second =
      SubmitRunResponse({{"collective", "naive"}, {"n", "2"}, {"bytes", "64"}}, 8, runner);
  ASSERT_EQ(second.status, 202) << second.body;

  const LabRun done = WaitForEnd(runner, 1);
  EXPECT_EQ(done.state, RunState::kDone);
  ASSERT_EQ(done.rows.size(), 1u);
  EXPECT_EQ(done.rows[0].bytes(), 4096);
  EXPECT_EQ(done.progress, (std::vector<std::string>{"started 4 workers", "done"}));
  const LabRun failed = WaitForEnd(runner, 2);
  EXPECT_EQ(failed.state, RunState::kFailed);
  EXPECT_EQ(failed.error, "worker 2 was lost");

  const Value status = Parse(RunStatusResponse({{"id", "1"}}, runner).body);
  EXPECT_EQ(Field(status, "state").string_value(), "done");
  EXPECT_EQ(Field(status, "rows").list_value().values_size(), 1);
  const Value failed_status = Parse(RunStatusResponse({{"id", "2"}}, runner).body);
  EXPECT_EQ(Field(failed_status, "error").string_value(), "worker 2 was lost");
  const std::string jsonl = RunRowsResponse({{"id", "1"}}, runner).body;
  ASSERT_EQ(jsonl.back(), '\n');
  EXPECT_EQ(Field(Parse(jsonl), "record").string_value(), "result");  // testbed report reads it

  const Value results = Parse(ResultsResponse(runner).body);
  EXPECT_EQ(Field(results, "rows").list_value().values_size(), 1);
  EXPECT_NE(Field(results, "markdown").string_value().find("ring"), std::string::npos);
}

TEST(LabRunner, BadRunInputIsA400AndQueuesNothing) {
  LabRunner runner(&FakeExecutor);
  ExpectBadRequest(SubmitRunResponse({{"collective", "ring"}, {"n", "9"}, {"bytes", "4KiB"}}, 8,
                                     runner),
                   "n must be 1..8");
  ExpectBadRequest(SubmitRunResponse({{"collective", "ring"}, {"n", "4"}, {"bytes", "6"}}, 8,
                                     runner),
                   "multiple of 4");
  ExpectBadRequest(SubmitRunResponse({{"collective", "ring"}, {"n", "4"}, {"bytes", "1GiB"}}, 8,
                                     runner),
                   "bytes must be");
  ExpectBadRequest(SubmitRunResponse({{"collective", "rong"}, {"n", "4"}, {"bytes", "4KiB"}}, 8,
                                     runner),
                   "unknown collective 'rong'");
  ExpectBadRequest(RunStatusResponse({{"id", "1"}}, runner), "no run with id 1");
  EXPECT_FALSE(runner.Get(1).has_value());
}

TEST(LabMemory, MeasuredZeroTrafficSumsEachStagesCollectives) {
  // N = 4, M = 1000 bytes: the ring all-reduce's 6000 bytes, RS and AG 3000 each.
  const std::vector<MeasuredZeroStage> stages =
      ZeroTrafficOf({6000, 60}, {3000, 40}, {3000, 30});
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_EQ(stages[0].bytes, 6000);
  EXPECT_EQ(stages[1].bytes, 9000);  // the all-reduce and an all-gather
  EXPECT_EQ(stages[1].time_us, 90);
  EXPECT_EQ(stages[2].bytes, 6000);
  EXPECT_EQ(stages[3].bytes, 9000);
  EXPECT_EQ(stages[3].time_us, 100);
  EXPECT_DOUBLE_EQ(stages[2].time_vs_ddp, 70.0 / 60);
  for (const MeasuredZeroStage& stage : stages) {
    EXPECT_DOUBLE_EQ(stage.bytes_vs_ddp, stage.model_vs_ddp) << "stage " << stage.stage;
  }
  EXPECT_EQ(stages[3].model_vs_ddp, 1.5);
}

// Every algorithm of the spec "runs": its closed-form bytes, 10 us per KiB.
absl::Status FormulaExecutor(const proto::ExperimentSpec& spec,
                             const std::function<void(const proto::ResultRow&)>& on_row,
                             std::ostream& progress) {
  for (const std::string& name : spec.algorithms()) {
    proto::ResultRow row = FakeRow(spec);
    const Collective* c = FindCollective(name, Kinds::kAll);
    row.set_algorithm(name);
    row.set_payload_bytes_total(c->formula_bytes(spec.workers(), spec.sizes(0)));
    row.set_time_us_avg(10.0 * row.payload_bytes_total() / 1024);
    on_row(row);
  }
  progress << "done";
  return absl::OkStatus();
}

TEST(LabRunner, ZeroTrafficRunsTheThreeCollectivesAndComparesEachStageWithDdp) {
  LabRunner runner(&FormulaExecutor);
  ExpectBadRequest(SubmitZeroTrafficResponse({{"n", "9"}, {"bytes", "4KiB"}}, 8, runner),
                   "n must be 1..8");
  ExpectBadRequest(SubmitZeroTrafficResponse({{"n", "4"}}, 8, runner), "bytes is missing");
  const LabResponse submitted =
      SubmitZeroTrafficResponse({{"n", "4"}, {"bytes", "64KiB"}}, 8, runner);
  ASSERT_EQ(submitted.status, 202) << submitted.body;
  const LabRun run = WaitForEnd(runner, 1);
  ASSERT_EQ(run.state, RunState::kDone);
  ASSERT_EQ(run.spec.algorithms_size(), 3);

  const Value zero = Parse(ZeroTrafficResponse({{"id", "1"}}, runner).body);
  EXPECT_EQ(Field(zero, "state").string_value(), "done");
  const auto& stages = Field(zero, "stages").list_value().values();
  ASSERT_EQ(stages.size(), 4);
  const double ddp_bytes = 2.0 * 3 * 65536;  // 2(N-1)M
  EXPECT_EQ(Field(stages[0], "bytes").number_value(), ddp_bytes);
  EXPECT_EQ(Field(stages[2], "bytes").number_value(), ddp_bytes);
  EXPECT_EQ(Field(stages[3], "bytes").number_value(), 1.5 * ddp_bytes);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(Field(stages[s], "bytes_vs_ddp").number_value(),
              Field(stages[s], "model_vs_ddp").number_value())
        << "stage " << s;
  }
  EXPECT_EQ(Field(stages[3], "time_vs_ddp").number_value(), 1.5);
  ExpectBadRequest(ZeroTrafficResponse({{"id", "2"}}, runner), "no run with id 2");
}

// The routes over a real socket: every embedded asset, the API's statuses.
class ServedLab {
 public:
  explicit ServedLab(const std::string& token = "") {
    AddLabRoutes(server_, runner_, {.max_workers = 8, .runs_on = "a fake", .link_gbit = 1},
                 token);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~ServedLab() {
    server_.stop();
    thread_.join();
  }
  httplib::Client Client() const { return httplib::Client("127.0.0.1", port_); }
  LabRunner& runner() { return runner_; }

 private:
  LabRunner runner_{&FakeExecutor};
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

class LabServerTest : public ::testing::Test {
 protected:
  ServedLab lab_;
  LabRunner& runner_ = lab_.runner();
};

TEST_F(LabServerTest, ServesEveryEmbeddedAssetAndThePageAtRoot) {
  httplib::Client client = lab_.Client();
  ASSERT_FALSE(LabAssets().empty());
  bool has_page = false;
  for (const LabAsset& asset : LabAssets()) {
    const bool page = asset.name == "index.html";
    has_page |= page;
    const auto response = client.Get(page ? "/" : "/" + std::string(asset.name));
    ASSERT_TRUE(response) << asset.name;
    EXPECT_EQ(response->status, 200) << asset.name;
    EXPECT_EQ(response->body, asset.content) << asset.name;
  }
  EXPECT_TRUE(has_page);
  const auto page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  const auto missing = client.Get("/nothing.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST_F(LabServerTest, ApiAnswersOverHttp) {
  httplib::Client client = lab_.Client();
  const auto info = client.Get("/api/lab");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->body, R"({"max_workers":8,"runs_on":"a fake","link_gbit":1})");
  const auto bad = client.Get("/api/trace?collective=ring&n=99");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->body, "n must be 1..16, not 99\n");
  const auto posted = client.Post("/api/run?collective=ring&n=2&bytes=64", "", "text/plain");
  ASSERT_TRUE(posted);
  EXPECT_EQ(posted->status, 202) << posted->body;
  const LabRun run = WaitForEnd(runner_, 1);
  EXPECT_EQ(run.state, RunState::kDone);
  const auto results = client.Get("/api/results");
  ASSERT_TRUE(results);
  EXPECT_EQ(results->status, 200);
  EXPECT_EQ(Field(Parse(results->body), "rows").list_value().values_size(), 1);
  const auto zero = client.Post("/api/zero-traffic?n=2&bytes=64", "", "text/plain");
  ASSERT_TRUE(zero);
  EXPECT_EQ(zero->status, 202) << zero->body;
  WaitForEnd(runner_, 2);
  const auto zero_status = client.Get("/api/zero-traffic?id=2");
  ASSERT_TRUE(zero_status);
  EXPECT_EQ(zero_status->status, 200) << zero_status->body;
}

TEST(LabServer, OffLoopbackTheApiAsksForTheTokenThePageDoesNot) {
  ServedLab lab("s3cret");
  httplib::Client client = lab.Client();
  const auto page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  for (const char* path : {"/api/collectives", "/api/collectives?token=s3cre",
                           "/api/collectives?token=s3cret0"}) {
    const auto refused = client.Get(path);
    ASSERT_TRUE(refused) << path;
    EXPECT_EQ(refused->status, 401) << path;
    EXPECT_NE(refused->body.find("needs its token"), std::string::npos);
  }
  const auto posted = client.Post("/api/run?collective=ring&n=2&bytes=64", "", "text/plain");
  ASSERT_TRUE(posted);
  EXPECT_EQ(posted->status, 401);
  EXPECT_FALSE(lab.runner().Get(1).has_value());
  const auto by_query = client.Get("/api/collectives?token=s3cret");
  ASSERT_TRUE(by_query);
  EXPECT_EQ(by_query->status, 200);
  const auto by_header = client.Get("/api/collectives", {{"X-Lab-Token", "s3cret"}});
  ASSERT_TRUE(by_header);
  EXPECT_EQ(by_header->status, 200);
}

TEST(LabServer, ASecondLabCannotTakeTheSamePort) {
  httplib::Server first, second;
  ListenAlone(first);
  ListenAlone(second);
  const int port = first.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  EXPECT_FALSE(second.bind_to_port("127.0.0.1", port));
}

}  // namespace
}  // namespace testbed
