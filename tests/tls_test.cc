// TLS on the coordinator's port, in one process, with certificates made by
// `openssl` for the test: a client that trusts the CA (and, for mutual TLS,
// shows a certificate signed by it) gets through; a plaintext client, a client
// trusting another CA, and - under mutual TLS - a client without a
// certificate do not. Also the flags' errors and the plaintext warning.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <sstream>

#include "proto/control.grpc.pb.h"
#include "proto/tls.h"
#include "server/coordinator_service.h"
#include "tests/tls_certs.h"
#include "worker/worker_daemon.h"

namespace testbed {
namespace {
namespace fs = std::filesystem;

const Credentials kJob{"job-1", "secret"};

std::string NewDir(const std::string& name) {
  std::string path = (fs::temp_directory_path() / ("testbed-tls-" + name + "-XXXXXX")).string();
  return mkdtemp(path.data());
}

Tls MustLoad(const TlsFlags& flags, bool need_identity) {
  absl::StatusOr<Tls> tls = LoadTls(flags, need_identity);
  EXPECT_TRUE(tls.ok()) << tls.status();
  return tls.ok() ? *tls : Tls{};
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::HaveOpenssl()) return;
    ours_ = NewDir("ours");
    theirs_ = NewDir("theirs");
    error_ = testing::MakeTlsDir(ours_, "ours");
    if (error_.empty()) error_ = testing::MakeTlsDir(theirs_, "theirs");
  }
  static void TearDownTestSuite() {
    if (!ours_.empty()) fs::remove_all(ours_);
    if (!theirs_.empty()) fs::remove_all(theirs_);
  }

  void SetUp() override {
    if (!testing::HaveOpenssl()) GTEST_SKIP() << "no openssl command (.ci/install-deps)";
    ASSERT_EQ(error_, "");
  }
  void TearDown() override {
    if (service_) service_->Shutdown();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  // Starts the coordinator on loopback with `tls` (Tls{}: plaintext).
  void StartServer(const Tls& tls) {
    CoordinatorOptions options;
    options.credentials = kJob;
    service_ = std::make_unique<CoordinatorService>(options);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", ServerCredentials(tls), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port_, 0);
  }

  // Health over a channel with `tls`, dialing `host`.
  grpc::Status Health(const Tls& tls, const std::string& host = "127.0.0.1") {
    auto stub = proto::Coordinator::NewStub(
        grpc::CreateChannel(host + ":" + std::to_string(port_), ChannelCredentials(tls)));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    AttachCredentials(kJob, context);
    proto::HealthReply reply;
    return stub->Health(&context, proto::HealthRequest(), &reply);
  }

  static std::string ours_, theirs_, error_;
  int port_ = 0;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
};

std::string TlsTest::ours_, TlsTest::theirs_, TlsTest::error_;

TEST_F(TlsTest, MutualTlsAdmitsOnlyClientsOfTheSameCa) {
  StartServer(MustLoad({.dir = ours_}, /*need_identity=*/true));

  const grpc::Status good = Health(MustLoad({.dir = ours_}, false));
  EXPECT_TRUE(good.ok()) << good.error_message();
  const grpc::Status by_name = Health(MustLoad({.dir = ours_}, false), "localhost");
  EXPECT_TRUE(by_name.ok()) << by_name.error_message();

  EXPECT_EQ(Health(Tls{}).error_code(), grpc::StatusCode::UNAVAILABLE)
      << "a plaintext client got through";
  // Trusts another CA: our server's certificate does not check out.
  EXPECT_EQ(Health(MustLoad({.dir = theirs_}, false)).error_code(), grpc::StatusCode::UNAVAILABLE)
      << "a client trusting another CA got through";
  // Trusts our CA but shows a certificate of another: the server refuses it.
  const Tls mixed = MustLoad(
      {.cert = theirs_ + "/cert.pem", .key = theirs_ + "/key.pem", .ca = ours_ + "/ca.pem"}, false);
  EXPECT_EQ(Health(mixed).error_code(), grpc::StatusCode::UNAVAILABLE)
      << "a client certificate of another CA got through";
  // Trusts our CA, shows no certificate: mutual TLS requires one.
  EXPECT_EQ(Health(MustLoad({.ca = ours_ + "/ca.pem"}, false)).error_code(),
            grpc::StatusCode::UNAVAILABLE)
      << "a client without a certificate got through mutual TLS";
}

TEST_F(TlsTest, ServerWithoutCaEncryptsButAsksNoClientCertificate) {
  StartServer(MustLoad({.cert = ours_ + "/cert.pem", .key = ours_ + "/key.pem"}, true));
  const grpc::Status st = Health(MustLoad({.ca = ours_ + "/ca.pem"}, false));
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(Health(Tls{}).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Health(MustLoad({.ca = theirs_ + "/ca.pem"}, false)).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, TheTokenIsStillCheckedUnderTls) {
  StartServer(MustLoad({.dir = ours_}, true));
  auto stub = proto::Coordinator::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(port_), ChannelCredentials(MustLoad({.dir = ours_}, false))));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  AttachCredentials({"job-1", "guess"}, context);
  proto::HealthReply reply;
  EXPECT_EQ(stub->Health(&context, proto::HealthRequest(), &reply).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

// The worker daemon's own channel: over TLS it reaches the coordinator (which
// then refuses its wrong token, by name); without TLS it never does, and says
// TLS may be why.
TEST_F(TlsTest, TheWorkerDaemonDialsWithTls) {
  StartServer(MustLoad({.dir = ours_}, true));
  std::ostringstream log;
  auto capture = std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(capture);
  WorkerOptions options;
  options.coordinator = "127.0.0.1:" + std::to_string(port_);
  options.credentials = {"job-1", "guess"};
  options.connect_timeout = std::chrono::seconds(2);
  options.tls = MustLoad({.dir = ours_}, false);
  const int with_tls = WorkerDaemon(options).Run();
  options.tls = Tls{};
  const int without = WorkerDaemon(options).Run();
  spdlog::set_default_logger(previous);
  EXPECT_EQ(with_tls, 1);
  EXPECT_EQ(without, 1);
  EXPECT_NE(log.str().find("the coordinator refused this worker: PERMISSION_DENIED"),
            std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("cannot reach the coordinator at " + options.coordinator +
                           " after 2 s (TLS is off here"),
            std::string::npos)
      << log.str();
}

TEST_F(TlsTest, FlagErrorsNameTheFlagAndTheFile) {
  const std::string missing = ours_ + "/nope.pem";
  absl::StatusOr<Tls> tls =
      LoadTls({.cert = ours_ + "/cert.pem", .key = missing, .ca = ours_ + "/ca.pem"}, true);
  ASSERT_FALSE(tls.ok());
  EXPECT_EQ(tls.status().message(),
            "--tls-key " + missing + ": cannot read: No such file or directory");

  tls = LoadTls({.ca = ours_ + "/ext.cnf"}, false);
  ASSERT_FALSE(tls.ok());
  EXPECT_NE(tls.status().message().find("--tls-ca " + ours_ + "/ext.cnf: not a PEM file"),
            std::string::npos)
      << tls.status();

  tls = LoadTls({.cert = ours_ + "/cert.pem"}, false);
  ASSERT_FALSE(tls.ok());
  EXPECT_NE(tls.status().message().find("--tls-cert and --tls-key go together"), std::string::npos);

  // A server needs its own certificate; a client may go with the CA alone.
  tls = LoadTls({.ca = ours_ + "/ca.pem"}, true);
  ASSERT_FALSE(tls.ok());
  EXPECT_NE(tls.status().message().find("--tls-cert and --tls-key"), std::string::npos);
  EXPECT_TRUE(LoadTls({.ca = ours_ + "/ca.pem"}, false).ok());

  // A folder without cert.pem and key.pem will do for a client, not a server.
  const std::string ca_only = NewDir("ca-only");
  fs::copy_file(ours_ + "/ca.pem", ca_only + "/ca.pem");
  EXPECT_TRUE(LoadTls({.dir = ca_only}, false).ok());
  tls = LoadTls({.dir = ca_only}, true);
  EXPECT_FALSE(tls.ok());
  fs::copy_file(ours_ + "/cert.pem", ca_only + "/cert.pem");
  tls = LoadTls({.dir = ca_only}, false);
  ASSERT_FALSE(tls.ok());
  EXPECT_EQ(tls.status().message(),
            "--tls-dir " + ca_only + "/key.pem: cannot read: No such file or directory");
  fs::remove_all(ca_only);

  tls = LoadTls({.dir = ours_ + "/none"}, false);
  ASSERT_FALSE(tls.ok());
  EXPECT_NE(tls.status().message().find("--tls-dir " + ours_ + "/none"), std::string::npos);

  // No flag: plaintext, no error.
  tls = LoadTls({}, true);
  ASSERT_TRUE(tls.ok());
  EXPECT_FALSE(tls->enabled);
}

TEST(TlsWarning, OnlyForPlaintextOffLoopback) {
  for (const char* local : {"127.0.0.1:50051", "localhost:0", "[::1]:5", "127.0.1.1:1"}) {
    EXPECT_TRUE(IsLoopback(local)) << local;
    EXPECT_EQ(PlaintextWarning(Tls{}, local), "") << local;
  }
  for (const char* remote : {"0.0.0.0:50051", "[::]:50051", "coordinator:50051", "10.0.0.2:1"}) {
    EXPECT_FALSE(IsLoopback(remote)) << remote;
    const std::string warning = PlaintextWarning(Tls{}, remote);
    EXPECT_NE(warning.find("token"), std::string::npos) << warning;
    EXPECT_NE(warning.find("--tls-dir"), std::string::npos) << warning;
    EXPECT_EQ(PlaintextWarning(Tls{.enabled = true}, remote), "");
  }
}

TEST(TlsFlagsTest, PassedOnWithAbsolutePaths) {
  const TlsFlags flags{.dir = "certs"};
  const std::vector<std::string> args = flags.AsArgs();
  ASSERT_EQ(args.size(), 2u);
  EXPECT_EQ(args[0], "--tls-dir");
  EXPECT_EQ(args[1], (fs::current_path() / "certs").string());
  EXPECT_TRUE(TlsFlags{}.AsArgs().empty());

  CLI::App app;
  TlsFlags parsed;
  AddTlsFlags(app, parsed);
  EXPECT_THROW(app.parse("--tls-dir d --tls-cert x.pem", /*program_name_included=*/false),
               CLI::ExcludesError);
}

}  // namespace
}  // namespace testbed
