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

}  // namespace testbed
