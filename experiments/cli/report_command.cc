#include "experiments/cli/report_command.h"

#include <fstream>

#include "experiments/results/course_table.h"
#include "experiments/results/result_row.h"

namespace testbed {

CLI::App* AddReportCommand(CLI::App& app, ReportOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "report",
      "The course notes' table from results files, in Markdown: per N and size, each "
      "algorithm's traffic (measured / formula, and on the wire), rounds, time (measured, "
      "predicted by the link model, predicted by the model fitted to the files) and its "
      "bottleneck link.");
  cmd->add_option("files", options.files, "Results files written by 'testbed local --out'")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--out", options.out, "Write the Markdown here instead of stdout");
  cmd->footer("Example: testbed report results.jsonl --out results.md");
  return cmd;
}

int RunReport(const ReportOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::vector<proto::ResultRow>> rows = ReadResultsFiles(options.files);
  if (!rows.ok()) {
    err << "error: " << rows.status().message() << "\n";
    return 2;
  }
  std::ofstream file;
  if (!options.out.empty()) {
    file.open(options.out, std::ios::trunc);
    if (!file) {
      err << "error: cannot write " << options.out << "\n";
      return 2;
    }
  }
  if (absl::Status st = PrintCourseTable(*rows, options.out.empty() ? out : file); !st.ok()) {
    err << "error: " << st.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace testbed
