// What one client can take of `testbed lab` (experiments/lab/lab_server.h,
// lab_runner.h): the run queue is bounded and refuses beyond it with 429 and
// one line, request bodies are capped, and clients that hold connections
// open without finishing a request are closed while the page goes on
// answering. Over a real socket on loopback, with an executor that holds the
// running run until the test lets it go.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <gtest/gtest.h>

#include "experiments/lab/lab_runner.h"
#include "experiments/lab/lab_server.h"

namespace testbed {
namespace {

// Holds every run until Open(); then each ends at once, without rows.
class Gate {
 public:
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    opened_.notify_all();
  }
  LabExecutor Executor() {
    return [this](const proto::ExperimentSpec&, const auto&, std::ostream&) {
      std::unique_lock lock(mu_);
      opened_.wait(lock, [this] { return open_; });
      return absl::OkStatus();
    };
  }

 private:
  std::mutex mu_;
  std::condition_variable opened_;
  bool open_ = false;
};

class LimitedLab : public ::testing::Test {
 protected:
  LimitedLab() {
    AddLabRoutes(server_, runner_, {.max_workers = 8, .runs_on = "a gate", .link_gbit = 1});
    LimitClients(server_);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~LimitedLab() override {
    gate_.Open();
    server_.stop();
    thread_.join();
  }
  httplib::Client Client() const { return httplib::Client("127.0.0.1", port_); }

  Gate gate_;
  LabRunner runner_{gate_.Executor()};
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST_F(LimitedLab, TheRunQueueIsBoundedAndRefusesBeyondItWith429AndOneLine) {
  httplib::Client client = Client();
  const auto post = [&client](int i) {
    const auto posted = client.Post("/api/run?collective=ring&n=2&bytes=64", "", "text/plain");
    ASSERT_TRUE(posted) << i;
    ASSERT_EQ(posted->status, 202) << i << ": " << posted->body;
  };
  // One runs (held by the gate), kMaxQueuedLabRuns wait behind it. The first
  // must have left the queue for the runner's thread before the others come,
  // or it would still count among the waiting (seen once in CI).
  post(0);
  ASSERT_FALSE(HasFatalFailure());
  for (int wait = 0; wait < 1000 && runner_.Get(1)->state != RunState::kRunning; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(runner_.Get(1)->state, RunState::kRunning) << "the first run never started";
  for (int i = 1; i <= kMaxQueuedLabRuns; ++i) post(i);
  ASSERT_FALSE(HasFatalFailure());
  const auto refused = client.Post("/api/run?collective=ring&n=2&bytes=64", "", "text/plain");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 429);
  EXPECT_EQ(refused->body,
            "the lab's queue is full: 16 runs are waiting already; try again when one has run\n");
  EXPECT_FALSE(runner_.Get(kMaxQueuedLabRuns + 2).has_value()) << "the refused run was kept";
  gate_.Open();
}

TEST_F(LimitedLab, ARequestBodyOverTheCapIsRefusedUnread) {
  httplib::Client client = Client();
  const std::string body(kMaxLabRequestBytes + 1, 'x');
  const auto big = client.Post("/api/run?collective=ring&n=2&bytes=64", body, "text/plain");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_FALSE(runner_.Get(1).has_value());
}

// A socket to the lab that sends half a request line and then nothing.
int SilentClient(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  constexpr char kHalf[] = "GET / HTTP/1.1\r\nHost: lab\r\n";
  (void)!write(fd, kHalf, sizeof kHalf - 1);
  return fd;
}

// Twice as many silent clients as serving threads: each is answered and
// closed once silent for kLabClientTimeout, so the page still answers (after
// about two waves of timeouts here, when every thread was taken) and no
// silent connection stays open.
TEST_F(LimitedLab, ManySilentClientsAreClosedAndThePageStillAnswers) {
  std::vector<int> silent;
  for (int i = 0; i < 2 * kLabServerThreads; ++i) {
    const int fd = SilentClient(port_);
    ASSERT_GE(fd, 0);
    silent.push_back(fd);
  }
  const auto start = std::chrono::steady_clock::now();
  httplib::Client client = Client();
  client.set_read_timeout(60, 0);
  const auto page = client.Get("/");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "the page answered " << seconds << " s after " << silent.size()
            << " silent clients connected\n";
  ASSERT_TRUE(page) << "no answer within 60 s";
  EXPECT_EQ(page->status, 200);
  for (const int fd : silent) {
    // What the server sends a silent client (a 4xx line, or nothing) and
    // then the end of the stream; a read that times out means it stays.
    timeval wait{.tv_sec = 60, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    char buffer[4096];
    ssize_t n = 0;
    while ((n = read(fd, buffer, sizeof buffer)) > 0) {
    }
    EXPECT_EQ(n, 0) << "a silent client was not closed";
    close(fd);
  }
}

}  // namespace
}  // namespace testbed
