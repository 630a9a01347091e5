// Rows of results printed three ways: an aligned table for people, CSV for
// spreadsheets, JSON lines (one object per row, the column names as keys,
// numbers as numbers) for scripts and plots.
//
// Thread-safety: a Table is a plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace testbed {

enum class OutputFormat { kTable, kCsv, kJson };
std::string_view Name(OutputFormat format);  // "table", "csv", "json"
std::optional<OutputFormat> ParseOutputFormat(std::string_view name);

// A list prints as "a;b" in tables and CSV, as [a, b] in JSON.
using Cell = std::variant<std::int64_t, double, std::string, std::vector<std::int64_t>>;

class Table {
 public:
  explicit Table(std::vector<std::string> columns) : columns_(std::move(columns)) {}

  // A row has one cell per column, in column order.
  void AddRow(std::vector<Cell> row) { rows_.push_back(std::move(row)); }

  void Print(OutputFormat format, std::ostream& out) const;

  // The same rows with only `columns` (those that exist), in that order.
  Table Select(const std::vector<std::string>& columns) const;

  const std::vector<std::string>& columns() const { return columns_; }
  const std::vector<std::vector<Cell>>& rows() const { return rows_; }

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<Cell>> rows_;
};

// One row as a JSON object (no trailing newline).
std::string JsonObject(const std::vector<std::string>& columns, const std::vector<Cell>& row);
std::string JsonString(std::string_view text);

}  // namespace testbed
