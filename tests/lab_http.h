// Waits on a testbed lab run over its HTTP API: for the lab's socket-level
// tests.
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include <httplib.h>

namespace testbed::testing {

// Polls GET `path` until the run is done or failed, for at most `limit`;
// returns its last JSON.
inline std::string WaitForLabRun(httplib::Client& client,
                                 const std::string& path = "/api/run?id=1",
                                 std::chrono::seconds limit = std::chrono::seconds(90)) {
  std::string body;
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (auto got = client.Get(path); got && got->status == 200) {
      body = got->body;
      if (body.find("\"state\":\"done\"") != std::string::npos ||
          body.find("\"state\":\"failed\"") != std::string::npos) {
        return body;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return body;
}

}  // namespace testbed::testing
