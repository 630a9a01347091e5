#include "experiments/cli/report_command.h"

#include <fstream>

#include "absl/strings/str_join.h"

#include "experiments/results/course_table.h"
#include "experiments/results/result_row.h"
#include "experiments/results/training_table.h"

namespace testbed {

CLI::App* AddReportCommand(CLI::App& app, ReportOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "report",
      "The course notes' table from results files, in Markdown: per N and size, each "
      "algorithm's traffic (measured / formula, and on the wire), rounds, time (measured, "
      "predicted by the link model, predicted by the model fitted to the files) and its "
      "bottleneck link. From training rows, the training table: per link, model and N, each "
      "scheme's step time split into compute and exposed and hidden communication, its bytes, "
      "the link model's time for the gradient and the fastest scheme.");
  cmd->add_option("files", options.files,
                  "Results files written by 'testbed local --out' or 'testbed train --out'")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--out", options.out, "Write the Markdown here instead of stdout");
  cmd->footer(
      "Examples: testbed report results.jsonl --out results.md\n"
      "          testbed report training_tradeoffs.jsonl");
  return cmd;
}

int RunReport(const ReportOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::vector<proto::ResultRow>> rows = ReadResultsFiles(options.files);
  absl::StatusOr<std::vector<proto::TrainingRow>> training =
      rows.ok() ? ReadTrainingFiles(options.files) : rows.status();
  if (!training.ok()) {
    err << "error: " << training.status().message() << "\n";
    return 2;
  }
  if (rows->empty() && training->empty()) {
    err << "error: no result records and no training rows in " << absl::StrJoin(options.files, ", ")
        << "\n";
    return 1;
  }
  std::ofstream file;
  if (!options.out.empty()) {
    file.open(options.out, std::ios::trunc);
    if (!file) {
      err << "error: cannot write " << options.out << "\n";
      return 2;
    }
  }
  std::ostream& markdown = options.out.empty() ? out : file;
  absl::Status st = absl::OkStatus();
  if (!rows->empty()) st = PrintCourseTable(*rows, markdown);
  if (st.ok() && !training->empty()) {
    if (!rows->empty()) markdown << "\n";
    st = PrintTrainingTable(*training, markdown);
  }
  if (!st.ok()) {
    err << "error: " << st.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace testbed
