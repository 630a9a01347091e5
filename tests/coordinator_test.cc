// The coordinator's gRPC surface in one process: calls without the job's
// token are refused, bad specs are refused with the field named, and a
// submission never waits unboundedly for workers that do not come.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>

#include "proto/control.grpc.pb.h"
#include "server/coordinator_service.h"
#include "worker/worker_daemon.h"

namespace testbed {
namespace {

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions options;
    options.credentials = {"job-1", "secret"};
    service_ = std::make_unique<CoordinatorService>(options);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    address_ = "127.0.0.1:" + std::to_string(port);
    stub_ = proto::Coordinator::NewStub(
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    service_->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  grpc::Status Health(const Credentials* credentials) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (credentials) AttachCredentials(*credentials, context);
    proto::HealthReply reply;
    return stub_->Health(&context, proto::HealthRequest(), &reply);
  }

  grpc::Status Submit(const proto::SubmitRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    AttachCredentials({"job-1", "secret"}, context);
    auto reader = stub_->Submit(&context, request);
    proto::SubmitEvent event;
    while (reader->Read(&event)) {
    }
    return reader->Finish();
  }

  std::string address_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<proto::Coordinator::Stub> stub_;
};

TEST_F(CoordinatorTest, RefusesCallsWithoutTheJobsToken) {
  EXPECT_EQ(Health(nullptr).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const Credentials wrong_token{"job-1", "guess"};
  EXPECT_EQ(Health(&wrong_token).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  const Credentials other_job{"job-2", "secret"};
  const grpc::Status st = Health(&other_job);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("job-1"), std::string::npos);
  const Credentials right{"job-1", "secret"};
  EXPECT_TRUE(Health(&right).ok());
}

TEST_F(CoordinatorTest, RefusesABadSpecNamingTheField) {
  proto::SubmitRequest request;
  request.mutable_spec()->set_workers(2);
  request.mutable_spec()->add_algorithms("bubble");
  request.mutable_spec()->add_sizes(4096);
  const grpc::Status st = Submit(request);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("unknown algorithm 'bubble'"), std::string::npos);
}

// SubmitRequest.job is a oneof: a request with neither an experiment nor a
// training run is refused by name, not run as an empty experiment.
TEST_F(CoordinatorTest, RefusesARequestNamingNoJob) {
  const grpc::Status st = Submit(proto::SubmitRequest{});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("names no job"), std::string::npos) << st.error_message();
}

TEST_F(CoordinatorTest, GivesUpOnWorkersThatNeverAttach) {
  proto::SubmitRequest request;
  request.mutable_spec()->set_workers(2);
  request.mutable_spec()->add_algorithms("ring");
  request.mutable_spec()->add_sizes(4096);
  request.set_wait_for_workers_s(1);
  const grpc::Status st = Submit(request);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(st.error_message().find("only 0 of 2 workers attached after 1 s"), std::string::npos)
      << st.error_message();
}

// The wait for one row: timeout x (iterations + warm-up + 1) + 30 s, up to the
// clock's last instant and never past it into the past.
TEST(RowDeadlineTest, SaturatesInsteadOfOverflowing) {
  using Clock = std::chrono::steady_clock;
  using std::chrono::seconds;
  proto::ExperimentSpec spec;
  spec.set_timeout_s(60);
  spec.set_iterations(10);
  spec.set_warmup(1);
  const Clock::time_point now = Clock::now();
  EXPECT_EQ(RowDeadline(now, spec), now + seconds(60 * 12 + 30));
  // The review's case: --iters 1000000 --timeout 86400 is ~2740 years.
  spec.set_timeout_s(86400);
  spec.set_iterations(1000000);
  spec.set_warmup(0);
  EXPECT_EQ(RowDeadline(now, spec), Clock::time_point::max());
  // Every field at its largest: neither the sum nor the product wraps.
  spec.set_timeout_s(~0u);
  spec.set_iterations(~0u);
  spec.set_warmup(~0u);
  EXPECT_EQ(RowDeadline(now, spec), Clock::time_point::max());
  // The boundary, with 1000.5 s left on the clock: 97 s x 10 + 30 fits, 98 s does not.
  const Clock::time_point late = Clock::time_point::max() - std::chrono::milliseconds(1000500);
  spec.set_iterations(9);
  spec.set_warmup(0);
  spec.set_timeout_s(97);
  EXPECT_EQ(RowDeadline(late, spec), late + seconds(1000));
  spec.set_timeout_s(98);
  EXPECT_EQ(RowDeadline(late, spec), Clock::time_point::max());
}

// Two submissions before the workers attach: the second must not wait beside
// the first, or both would start on the same workers when they came.
TEST_F(CoordinatorTest, ASecondSubmissionIsRefusedWhileTheFirstWaitsForWorkers) {
  proto::SubmitRequest request;
  request.mutable_spec()->set_workers(2);
  request.mutable_spec()->add_algorithms("ring");
  request.mutable_spec()->add_sizes(4096);
  request.set_wait_for_workers_s(4);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  AttachCredentials({"job-1", "secret"}, context);
  auto first = stub_->Submit(&context, request);
  // Its first progress note (after 2 s) says it is waiting for workers.
  proto::SubmitEvent event;
  ASSERT_TRUE(first->Read(&event));
  EXPECT_NE(event.progress().find("waiting: 0 of 2 workers attached"), std::string::npos)
      << event.DebugString();

  request.set_wait_for_workers_s(1);
  const grpc::Status second = Submit(request);
  EXPECT_EQ(second.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << second.error_message();
  EXPECT_NE(second.error_message().find("experiment 1 is waiting for workers"), std::string::npos)
      << second.error_message();

  // The first still waits, and gives up on its own terms.
  while (first->Read(&event)) {
  }
  const grpc::Status st = first->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(st.error_message().find("only 0 of 2 workers attached after 4 s"), std::string::npos)
      << st.error_message();
  // Then the next submission gets its turn to wait.
  const grpc::Status third = Submit(request);
  EXPECT_EQ(third.error_code(), grpc::StatusCode::UNAVAILABLE) << third.error_message();
}

// A worker the coordinator refuses says why: the coordinator's status, not a
// CANCELLED of the worker's own making.
TEST_F(CoordinatorTest, AWorkerWithAWrongTokenIsToldWhy) {
  std::ostringstream log;
  auto capture = std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(capture);
  WorkerOptions options;
  options.coordinator = address_;
  options.credentials = {"job-1", "guess"};
  options.connect_timeout = std::chrono::seconds(10);
  const int code = WorkerDaemon(options).Run();
  spdlog::set_default_logger(previous);
  EXPECT_EQ(code, 1);
  EXPECT_NE(log.str().find("the coordinator refused this worker: PERMISSION_DENIED: wrong token "
                           "for job job-1"),
            std::string::npos)
      << log.str();
}

}  // namespace
}  // namespace testbed
