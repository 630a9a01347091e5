// `testbed lab`: the classroom lab - one web page, served from this process
// with its assets embedded, over the real testbed: traces of the executor,
// experiments run on a LocalCluster the lab starts (on loopback or in an
// emulated cluster) or on daemons already running (compose), the course's
// memory calculators and the course table of the session (experiments/lab/).
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "proto/vocabulary.pb.h"

namespace testbed {

struct LabOptions {
  std::string listen = "127.0.0.1:8080";  // port 0: any free port (printed)
  int workers = 8;                        // the largest N a run may ask for
  std::string log_dir;                    // default: a new folder under /tmp, removed at exit
  proto::Network::Kind network = proto::Network::loopback;  // netns: the emulated cluster (root)
  std::uint64_t link_rate_bps = 0;        // netns: each node's link; 0: unlimited
  std::string coordinator;                // HOST:PORT of running daemons: start none
};

CLI::App* AddLabCommand(CLI::App& app, LabOptions& options);
int RunLab(const LabOptions& options);

}  // namespace testbed
