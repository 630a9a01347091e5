// `testbed`: the experiment harness's command line. Each subcommand lives in
// its own file; this one only wires them up.
#include <iostream>

#include <CLI/CLI.hpp>

#include "experiments/cli/report_command.h"
#include "experiments/cli/local_command.h"
#include "experiments/cli/run_command.h"
#include "experiments/cli/simulate_command.h"
#include "experiments/cli/fit_command.h"
#include "experiments/cli/lab_command.h"
#include "experiments/cli/model_command.h"
#include "experiments/cli/trace_command.h"
#include "experiments/cli/train_command.h"
#include "experiments/cli/traffic_command.h"
#include "experiments/cli/workload_command.h"
#include "allreduce/collective.h"

int main(int argc, char** argv) {
  CLI::App app(
      "testbed: a parameter server and all-reduce algorithms, measured side by side: " +
          testbed::CollectiveNames(testbed::Kinds::kAll) +
          ".\nRun 'testbed SUBCOMMAND --help' for each one.",
      "testbed");
  app.require_subcommand(1);

  testbed::TraceOptions trace;
  CLI::App* trace_cmd = testbed::AddTraceCommand(app, trace);
  testbed::TrafficOptions traffic;
  CLI::App* traffic_cmd = testbed::AddTrafficCommand(app, traffic);
  testbed::ModelOptions model;
  CLI::App* model_cmd = testbed::AddModelCommand(app, model);
  testbed::FitOptions fit;
  CLI::App* fit_cmd = testbed::AddFitCommand(app, fit);
  testbed::ReportOptions report;
  CLI::App* report_cmd = testbed::AddReportCommand(app, report);
  testbed::WorkloadOptions workload;
  CLI::App* workload_cmd = testbed::AddWorkloadCommand(app, workload);

  testbed::LocalOptions local;
  CLI::App* local_cmd = testbed::AddLocalCommand(app, local);
  testbed::RunOptions run;
  CLI::App* run_cmd = testbed::AddRunCommand(app, run);
  testbed::SimulateOptions simulate;
  CLI::App* simulate_cmd = testbed::AddSimulateCommand(app, simulate);
  testbed::TrainOptions train;
  CLI::App* train_cmd = testbed::AddTrainCommand(app, train);
  testbed::LabOptions lab;
  CLI::App* lab_cmd = testbed::AddLabCommand(app, lab);

  CLI11_PARSE(app, argc, argv);
  if (local_cmd->parsed()) return testbed::RunLocal(local, *local_cmd);
  if (run_cmd->parsed()) return testbed::RunRun(run, *run_cmd);
  if (simulate_cmd->parsed()) return testbed::RunSimulate(simulate, *simulate_cmd, std::cerr);
  if (train_cmd->parsed()) return testbed::RunTrain(train, std::cout, std::cerr);
  if (lab_cmd->parsed()) return testbed::RunLab(lab);
  if (trace_cmd->parsed()) return testbed::RunTrace(trace, std::cout, std::cerr);
  if (traffic_cmd->parsed()) return testbed::RunTraffic(traffic, std::cout, std::cerr);
  if (model_cmd->parsed()) return testbed::RunModel(model, std::cout, std::cerr);
  if (fit_cmd->parsed()) return testbed::RunFit(fit, std::cout, std::cerr);
  if (report_cmd->parsed()) return testbed::RunReport(report, std::cout, std::cerr);
  if (workload_cmd->parsed()) return testbed::RunWorkload(workload, std::cout, std::cerr);
  return 2;
}
