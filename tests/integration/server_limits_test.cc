// The server daemon's stated limits, through its real port with clients
// generated from the .proto: a message over the size limit, a tensor past
// --max-tensors and a call past --max-calls are each refused with
// RESOURCE_EXHAUSTED, and the daemon goes on serving. The unit tests hold the
// limits' arithmetic; this one holds the daemon's flags and gRPC's own
// message limit to what docs/security.md ("Limits") states.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "proto/credentials.h"
#include "proto/parameter_server.grpc.pb.h"
#include "tests/process_runner.h"

namespace testbed {
namespace {

using testing::TestbedProcess;

const Credentials kCredentials{"limits", "secret"};

class ServerLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("TESTBED_JOB_ID", kCredentials.job_id.c_str(), 1);
    setenv("TESTBED_TOKEN", kCredentials.token.c_str(), 1);
    dir_ = testing::TempDir("limits");
    const std::string port_file = dir_ + "/port";
    server_ = std::make_unique<TestbedProcess>(
        TESTBED_SERVER_PATH,
        std::vector<std::string>{"--listen", "127.0.0.1:0", "--port-file", port_file,
                                 "--max-tensors", "2", "--max-calls", "3"},
        dir_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!std::filesystem::exists(port_file) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    int port = 0;
    std::ifstream(port_file) >> port;
    ASSERT_NE(port, 0) << server_->Stdout();
    stub_ = proto::ParameterServer::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    server_.reset();  // SIGTERM, then SIGKILL: ended by PID even when the test failed
    std::filesystem::remove_all(dir_);
  }

  static std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    AttachCredentials(kCredentials, *context);
    return context;
  }
  grpc::Status Declare(const std::string& name) {
    proto::DeclareRequest request;
    request.mutable_tensor()->set_name(name);
    request.mutable_tensor()->set_count(4);
    request.mutable_tensor()->set_dtype(proto::Dtype::float32);
    request.mutable_tensor()->set_workers(2);
    request.set_shards(1);
    proto::DeclareReply reply;
    return stub_->Declare(Context().get(), request, &reply);
  }
  grpc::Status Stats() {
    proto::StatsReply reply;
    return stub_->Stats(Context().get(), proto::StatsRequest(), &reply);
  }

  std::string dir_;
  std::unique_ptr<TestbedProcess> server_;
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
};

TEST_F(ServerLimitsTest, EveryLimitIsStatedAtStartAndRefusedByName) {
  EXPECT_NE(server_->WaitForStdout("limits: ", std::chrono::seconds(10)).find("2 tensors"),
            std::string::npos)
      << server_->Stdout();
  EXPECT_NE(server_->Stdout().find("3 calls at once; messages up to 16 MiB"), std::string::npos)
      << server_->Stdout();

  // A message over 16 MiB never reaches a handler.
  const grpc::Status huge = Declare(std::string((16 << 20) + 1, 'x'));
  EXPECT_EQ(huge.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << huge.error_message();
  ASSERT_TRUE(Stats().ok());

  ASSERT_TRUE(Declare("a").ok());
  ASSERT_TRUE(Declare("b").ok());
  const grpc::Status third = Declare("c");
  EXPECT_EQ(third.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(third.error_message().find("(testbed-server --max-tensors)"), std::string::npos)
      << third.error_message();

  // Three pulls wait on a step nobody pushes: the fourth call is refused.
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<proto::ValueChunk>>> stalled;
  proto::PullRequest request;
  request.set_tensor("a");
  request.set_step(1);
  for (int i = 0; i < 3; ++i) {
    contexts.push_back(Context());
    stalled.push_back(stub_->Pull(contexts.back().get(), request));
  }
  grpc::Status refused;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {  // until the three are admitted on the server's threads
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    refused = Stats();
  } while (refused.ok() && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(refused.error_message(),
            "this server already serves 3 calls at once, its limit (testbed-server --max-calls)");
  for (std::size_t i = 0; i < contexts.size(); ++i) {
    contexts[i]->TryCancel();
    stalled[i]->Finish().IgnoreError();
  }
  const auto freed_by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!Stats().ok() && std::chrono::steady_clock::now() < freed_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(Stats().ok());
}

}  // namespace
}  // namespace testbed
