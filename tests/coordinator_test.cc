// The coordinator's gRPC surface in one process: calls without the job's
// token are refused, bad specs are refused with the field named, and a
// submission never waits unboundedly for workers that do not come.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include "proto/control.grpc.pb.h"
#include "server/coordinator_service.h"

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
    stub_ = proto::Coordinator::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
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

}  // namespace
}  // namespace testbed
