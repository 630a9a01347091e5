// `testbed report`: the course notes' table (experiments/results/course_table.h)
// of one or more results files, in Markdown.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace testbed {

struct ReportOptions {
  std::vector<std::string> files;
  std::string out;  // default stdout
};

CLI::App* AddReportCommand(CLI::App& app, ReportOptions& options);
int RunReport(const ReportOptions& options, std::ostream& out, std::ostream& err);

}  // namespace testbed
