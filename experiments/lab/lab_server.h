// The lab's HTTP surface on a cpp-httplib server: the embedded page at "/"
// (and each asset by name), and lab_api.h's endpoints under /api/. With a
// token, every /api/ request must carry it - the X-Lab-Token header or a
// token= parameter - or gets a 401 line: a lab off loopback is the class's,
// not the network's.
//
// Thread-safety: the routes run on the server's thread pool; what they share
// (the runner) synchronizes itself.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <string>

#include "experiments/lab/lab_api.h"
#include "experiments/lab/lab_runner.h"

namespace testbed {

// `info.max_workers`: the largest N a run may ask for. `runner` outlives
// `server`'s listening. An empty `token` asks none (loopback).
void AddLabRoutes(httplib::Server& server, LabRunner& runner, const LabInfo& info,
                  const std::string& token = "");

// Sockets that a second lab on the same port cannot share: cpp-httplib's
// default sets SO_REUSEPORT, and then two labs would split the class's
// requests between them without a word. SO_REUSEADDR stays (a restarted lab
// gets its port back at once). Call before binding.
void ListenAlone(httplib::Server& server);

// What one client can take of the lab, stated in `testbed lab --help`: the
// threads that serve connections (cpp-httplib gives each open connection one:
// a classroom of browsers, each keeping a few open, needs dozens), how long a
// client may be silent mid-request, how long an idle connection is kept for
// its next request, and the largest request body (the API's requests are a
// few parameters; a larger one is answered 413 unread). The run queue's bound
// is kMaxQueuedLabRuns (lab_runner.h).
inline constexpr int kLabServerThreads = 32;
inline constexpr std::chrono::seconds kLabClientTimeout{5};
inline constexpr std::chrono::seconds kLabKeepAlive{2};
inline constexpr std::size_t kMaxLabRequestBytes = 64 * 1024;

// Applies those limits to `server`. Call before listening.
void LimitClients(httplib::Server& server);

// The limits above in one line, for --help.
std::string LabLimitsText();

}  // namespace testbed
