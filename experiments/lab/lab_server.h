// The lab's HTTP surface on a cpp-httplib server: the embedded page at "/"
// (and each asset by name), and lab_api.h's endpoints under /api/.
//
// Thread-safety: the routes run on the server's thread pool; what they share
// (the runner) synchronizes itself.
#pragma once

#include <httplib.h>

#include "experiments/lab/lab_runner.h"

namespace testbed {

// `max_workers`: the largest N a run may ask for. `runner` outlives `server`'s listening.
void AddLabRoutes(httplib::Server& server, LabRunner& runner, int max_workers);

}  // namespace testbed
