// `testbed`: the experiment harness's command line. Each subcommand lives in
// its own file; this one only wires them up.
#include <iostream>

#include <CLI/CLI.hpp>

#include "experiments/trace_command.h"
#include "experiments/traffic_command.h"

int main(int argc, char** argv) {
  CLI::App app(
      "testbed: a parameter server and four all-reduce algorithms (naive, ring, tree, "
      "butterfly), measured side by side.\nRun 'testbed SUBCOMMAND --help' for each one.",
      "testbed");
  app.require_subcommand(1);

  testbed::TraceOptions trace;
  CLI::App* trace_cmd = testbed::AddTraceCommand(app, trace);
  testbed::TrafficOptions traffic;
  CLI::App* traffic_cmd = testbed::AddTrafficCommand(app, traffic);

  CLI11_PARSE(app, argc, argv);
  if (trace_cmd->parsed()) return testbed::RunTrace(trace, std::cout, std::cerr);
  if (traffic_cmd->parsed()) return testbed::RunTraffic(traffic, std::cout, std::cerr);
  return 2;
}
