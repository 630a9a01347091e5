#include "experiments/results/table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace testbed {
namespace {

std::string FormatCell(const Cell& cell) {
  if (const auto* i = std::get_if<std::int64_t>(&cell)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&cell)) {
    char buf[64];
    // Six significant digits, but never an exponent for a big time in us.
    std::snprintf(buf, sizeof buf, std::fabs(*d) >= 1e5 ? "%.0f" : "%.6g", *d);
    return buf;
  }
  if (const auto* list = std::get_if<std::vector<std::int64_t>>(&cell)) {
    std::string out;
    for (std::int64_t v : *list) out += (out.empty() ? "" : ";") + std::to_string(v);
    return out.empty() ? "-" : out;
  }
  return std::get<std::string>(cell);
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string_view Name(OutputFormat format) {
  switch (format) {
    case OutputFormat::kCsv: return "csv";
    case OutputFormat::kJson: return "json";
    case OutputFormat::kTable: break;
  }
  return "table";
}

std::optional<OutputFormat> ParseOutputFormat(std::string_view name) {
  for (OutputFormat format : {OutputFormat::kTable, OutputFormat::kCsv, OutputFormat::kJson}) {
    if (name == Name(format)) return format;
  }
  return std::nullopt;
}

std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string JsonObject(const std::vector<std::string>& columns, const std::vector<Cell>& row) {
  std::string out = "{";
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (i > 0) out += ", ";
    out += JsonString(columns[i]) + ": ";
    if (const auto* s = std::get_if<std::string>(&row[i])) {
      out += JsonString(*s);
    } else if (const auto* list = std::get_if<std::vector<std::int64_t>>(&row[i])) {
      out += "[";
      for (std::size_t k = 0; k < list->size(); ++k) {
        out += (k ? ", " : "") + std::to_string((*list)[k]);
      }
      out += "]";
    } else if (const auto* d = std::get_if<double>(&row[i]); d && !std::isfinite(*d)) {
      // JSON has no nan or inf; these are protobuf's JSON spellings of them.
      out += std::isnan(*d) ? "\"NaN\"" : *d > 0 ? "\"Infinity\"" : "\"-Infinity\"";
    } else if (const auto* d = std::get_if<double>(&row[i])) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", *d);  // round-trips
      out += buf;
    } else {
      out += FormatCell(row[i]);
    }
  }
  return out + "}";
}

Table Table::Select(const std::vector<std::string>& wanted) const {
  std::vector<std::size_t> index;
  std::vector<std::string> kept;
  for (const std::string& name : wanted) {
    auto it = std::find(columns_.begin(), columns_.end(), name);
    if (it == columns_.end()) continue;
    index.push_back(static_cast<std::size_t>(it - columns_.begin()));
    kept.push_back(name);
  }
  Table out(kept);
  for (const auto& row : rows_) {
    std::vector<Cell> cells;
    for (std::size_t i : index) cells.push_back(row[i]);
    out.AddRow(std::move(cells));
  }
  return out;
}

void Table::Print(OutputFormat format, std::ostream& out) const {
  switch (format) {
    case OutputFormat::kJson:
      for (const auto& row : rows_) out << JsonObject(columns_, row) << "\n";
      return;
    case OutputFormat::kCsv:
      for (std::size_t i = 0; i < columns_.size(); ++i)
        out << (i ? "," : "") << CsvField(columns_[i]);
      out << "\n";
      for (const auto& row : rows_) {
        for (std::size_t i = 0; i < row.size(); ++i)
          out << (i ? "," : "") << CsvField(FormatCell(row[i]));
        out << "\n";
      }
      return;
    case OutputFormat::kTable: {
      std::vector<std::size_t> width(columns_.size());
      for (std::size_t i = 0; i < columns_.size(); ++i) width[i] = columns_[i].size();
      for (const auto& row : rows_)
        for (std::size_t i = 0; i < row.size(); ++i)
          width[i] = std::max(width[i], FormatCell(row[i]).size());
      const auto print_row = [&](const std::vector<std::string>& cells, bool numeric_right) {
        for (std::size_t i = 0; i < cells.size(); ++i) {
          const std::size_t pad = width[i] - cells[i].size();
          const bool right = numeric_right && i < rows_.front().size() &&
                             (std::holds_alternative<std::int64_t>(rows_.front()[i]) ||
                              std::holds_alternative<double>(rows_.front()[i]));
          out << (i ? "  " : "") << (right ? std::string(pad, ' ') : "") << cells[i]
              << (right || i + 1 == cells.size() ? "" : std::string(pad, ' '));
        }
        out << "\n";
      };
      print_row(columns_, !rows_.empty());
      for (const auto& row : rows_) {
        std::vector<std::string> cells;
        for (const Cell& cell : row) cells.push_back(FormatCell(cell));
        print_row(cells, true);
      }
      return;
    }
  }
}

}  // namespace testbed
