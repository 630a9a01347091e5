// `testbed lab`: the classroom lab - one web page, served from this process
// with its assets embedded, over the real testbed: traces of the executor,
// experiments run on a LocalCluster the lab starts, the course's memory
// calculators and the course table of the session (experiments/lab/).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace testbed {

struct LabOptions {
  std::string listen = "127.0.0.1:8080";  // port 0: any free port (printed)
  int workers = 8;                        // the largest N a run may ask for
  std::string log_dir;                    // default: a new folder under /tmp, removed at exit
};

CLI::App* AddLabCommand(CLI::App& app, LabOptions& options);
int RunLab(const LabOptions& options);

}  // namespace testbed
