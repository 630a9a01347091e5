#include "experiments/fit_command.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "allreduce/cost_model.h"
#include "experiments/cli_common.h"

namespace testbed {
namespace {

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  absl::StatusOr<FlatJsonObject> Object() {
    FlatJsonObject object;
    SkipSpace();
    if (!Eat('{')) return Error("expected '{'");
    SkipSpace();
    if (!Eat('}')) {
      while (true) {
        SkipSpace();
        std::string key;
        if (!String(key)) return Error("expected a quoted key");
        SkipSpace();
        if (!Eat(':')) return Error("expected ':'");
        SkipSpace();
        std::optional<JsonScalar> value;
        if (!Value(value, 0)) return Error("bad value for \"" + key + "\"");
        if (value) object.insert_or_assign(std::move(key), std::move(*value));
        SkipSpace();
        if (Eat('}')) break;
        if (!Eat(',')) return Error("expected ',' or '}'");
      }
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("text after the object");
    return object;
  }

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(what + " at column " + std::to_string(pos_ + 1));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\n')) {
      ++pos_;
    }
  }
  bool Eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  static void AppendUtf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }
  bool String(std::string& out) {
    if (!Eat('"')) return false;
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) return false;
      const char e = text_[pos_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (pos_ + 4 > text_.size()) return false;
          unsigned code = 0;
          const auto [ptr, ec] =
              std::from_chars(text_.data() + pos_, text_.data() + pos_ + 4, code, 16);
          if (ec != std::errc() || ptr != text_.data() + pos_ + 4) return false;
          pos_ += 4;
          AppendUtf8(out, code);  // surrogate pairs stay as two code units; only keys matter
          break;
        }
        default: return false;
      }
    }
    return false;
  }
  // Reads any value; scalars land in `out`, null/lists/objects leave it empty.
  bool Value(std::optional<JsonScalar>& out, int depth) {
    if (depth > 64 || pos_ >= text_.size()) return false;
    const char c = text_[pos_];
    if (c == '"') {
      std::string s;
      if (!String(s)) return false;
      out = std::move(s);
      return true;
    }
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++pos_;
      SkipSpace();
      if (Eat(close)) return true;
      while (true) {
        SkipSpace();
        if (c == '{') {
          std::string key;
          if (!String(key)) return false;
          SkipSpace();
          if (!Eat(':')) return false;
          SkipSpace();
        }
        std::optional<JsonScalar> ignored;
        if (!Value(ignored, depth + 1)) return false;
        SkipSpace();
        if (Eat(close)) return true;
        if (!Eat(',')) return false;
      }
    }
    if (Literal("true")) { out = true; return true; }
    if (Literal("false")) { out = false; return true; }
    if (Literal("null")) return true;
    std::size_t end = pos_;
    while (end < text_.size() && std::string_view("+-0123456789.eE").find(text_[end]) !=
                                     std::string_view::npos) {
      ++end;
    }
    double number = 0;
    const auto [ptr, ec] = std::from_chars(text_.data() + pos_, text_.data() + end, number);
    if (end == pos_ || ec != std::errc() || ptr != text_.data() + end) return false;
    pos_ = end;
    out = number;
    return true;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

const std::string* GetString(const FlatJsonObject& o, std::string_view key) {
  auto it = o.find(key);
  return it == o.end() ? nullptr : std::get_if<std::string>(&it->second);
}
const double* GetNumber(const FlatJsonObject& o, std::string_view key) {
  auto it = o.find(key);
  return it == o.end() ? nullptr : std::get_if<double>(&it->second);
}

std::string Join(const std::set<std::int64_t>& values) {
  std::string out;
  for (std::int64_t v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

}  // namespace

absl::StatusOr<FlatJsonObject> ParseFlatJsonObject(std::string_view line) {
  return JsonParser(line).Object();
}

absl::StatusOr<std::vector<MeasuredRow>> ReadMeasuredRows(std::istream& in) {
  std::vector<MeasuredRow> rows;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto object = ParseFlatJsonObject(line);
    const std::string where = "line " + std::to_string(number) + ": ";
    if (!object.ok()) return absl::InvalidArgumentError(where + std::string(object.status().message()));
    const std::string* record = GetString(*object, "record");
    if (record == nullptr || *record != "result") continue;
    MeasuredRow row;
    const std::string* algorithm = GetString(*object, "algorithm");
    const double* workers = GetNumber(*object, "workers");
    const double* bytes = GetNumber(*object, "bytes");
    const double* time = GetNumber(*object, "time_us_avg");
    for (const auto& [field, present] :
         {std::pair<const char*, bool>{"algorithm", algorithm != nullptr},
          {"workers", workers != nullptr}, {"bytes", bytes != nullptr},
          {"time_us_avg", time != nullptr}}) {
      if (!present) return absl::InvalidArgumentError(where + "a result without \"" + field + "\"");
    }
    row.algorithm = *algorithm;
    row.workers = static_cast<int>(*workers);
    row.bytes = static_cast<std::int64_t>(*bytes);
    row.time_us_avg = *time;
    if (row.workers < 1 || row.bytes < 0) {
      return absl::InvalidArgumentError(where + "workers must be >= 1 and bytes >= 0");
    }
    if (const std::string* t = GetString(*object, "transport")) row.transport = *t;
    row.dtype = "float32";
    if (const std::string* d = GetString(*object, "dtype")) row.dtype = *d;
    if (const double* s = GetNumber(*object, "servers"); s != nullptr && *s >= 1) {
      row.servers = static_cast<int>(*s);
    }
    for (const auto& [field, slot] :
         {std::pair{"payload_bytes_total", &row.payload_bytes_total},
          std::pair{"theory_bytes_total", &row.theory_bytes_total},
          std::pair{"wire_bytes_sent_total", &row.wire_bytes_sent_total},
          std::pair{"wire_bytes_received_total", &row.wire_bytes_received_total},
          std::pair{"model_time_us", &row.model_time_us}, std::pair{"rounds", &row.rounds}}) {
      if (const double* value = GetNumber(*object, field)) *slot = *value;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

CLI::App* AddFitCommand(CLI::App& app, FitOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "fit",
      "Fits the alpha-beta cost model to measured times: per (algorithm, transport), "
      "time_us_avg = alpha * rounds + beta * bottleneck_bytes, both terms read off the "
      "schedules for each row's workers and bytes; least squares, alpha and beta >= 0.");
  cmd->add_option("files", options.files, "Results files written by 'testbed local --out'")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-f,--format", options.format, "table, csv or json (one object per line)")
      ->check(FormatValidator())
      ->capture_default_str();
  cmd->footer(
      "Columns: alpha_us (per round), beta_ns_per_byte and link_gbit_s = 8 / beta (the link\n"
      "rate beta implies; 0 when beta <= 0), r2, worst_rel_residual = max |measured - model| / measured.\n"
      "A group needs at least 2 distinct sizes; groups that have fewer are named on stderr.\n"
      "ps rows: 2 rounds of N*M/S bytes, S = the row's servers.\n"
      "Example: testbed fit results.jsonl --format csv");
  return cmd;
}

int RunFit(const std::vector<MeasuredRow>& rows, const std::string& format_name,
           std::ostream& out, std::ostream& err) {
  const auto format = ParseOutputFormat(format_name);
  if (!format) {
    err << "error: unknown format '" << format_name << "'\n";
    return 2;
  }
  struct Group {
    std::vector<FitPoint> points;
    std::set<std::int64_t> sizes, workers;
  };
  std::map<std::pair<std::string, std::string>, Group> groups;
  std::vector<std::pair<std::string, std::string>> order;  // first appearance
  for (const MeasuredRow& row : rows) {
    const auto type = ParseDataType(row.dtype);
    const std::int64_t element = type ? static_cast<std::int64_t>(ElementSize(*type)) : 1;
    const absl::StatusOr<CostEstimate> e =
        EstimateAlgorithm(row.algorithm, row.workers, row.servers, row.bytes, element, LinkModel{});
    if (!e.ok()) {
      err << "warning: skipping rows of unknown algorithm '" << row.algorithm << "'\n";
      continue;
    }
    const auto key = std::make_pair(row.algorithm, row.transport);
    if (!groups.contains(key)) order.push_back(key);
    Group& g = groups[key];
    g.points.push_back(FitPoint{e->rounds, e->bottleneck_bytes, row.time_us_avg * 1e-6});
    g.sizes.insert(row.bytes);
    g.workers.insert(row.workers);
  }

  Table table({"algorithm", "transport", "workers", "points", "sizes", "alpha_us",
               "beta_ns_per_byte", "link_gbit_s", "r2", "worst_rel_residual"});
  for (const auto& key : order) {
    const Group& g = groups[key];
    const std::string name = key.first + " (" + (key.second.empty() ? "-" : key.second) + ")";
    if (g.sizes.size() < 2) {
      err << name << ": needs at least 2 distinct sizes to fit alpha and beta, has "
          << g.sizes.size() << "; skipped\n";
      continue;
    }
    const auto fit = FitAlphaBeta(g.points);
    if (!fit.ok()) {
      err << name << ": " << fit.status().message() << "; skipped\n";
      continue;
    }
    const double beta_ns = fit->link.beta_s_per_byte * 1e9;
    table.AddRow({key.first, key.second.empty() ? std::string("-") : key.second,
                  Join(g.workers), std::int64_t{fit->points},
                  static_cast<std::int64_t>(g.sizes.size()), fit->link.alpha_s * 1e6, beta_ns,
                  beta_ns > 0 ? 8.0 / beta_ns : 0.0, fit->r_squared,
                  fit->worst_relative_residual});
  }
  if (table.rows().empty()) {
    err << "error: no group of results could be fitted\n";
    return 1;
  }
  table.Print(*format, out);
  return 0;
}

absl::StatusOr<std::vector<MeasuredRow>> ReadResultsFiles(const std::vector<std::string>& files) {
  std::vector<MeasuredRow> rows;
  for (const std::string& file : files) {
    std::ifstream in(file);
    if (!in) return absl::NotFoundError("cannot open " + file);
    auto read = ReadMeasuredRows(in);
    if (!read.ok()) return absl::InvalidArgumentError(file + ": " + std::string(read.status().message()));
    rows.insert(rows.end(), read->begin(), read->end());
  }
  return rows;
}

int RunFit(const FitOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::vector<MeasuredRow>> read = ReadResultsFiles(options.files);
  if (!read.ok()) {
    err << "error: " << read.status().message() << "\n";
    return 2;
  }
  const std::vector<MeasuredRow>& rows = *read;
  if (rows.empty()) {
    err << "error: no result records in " << options.files.front() << "\n";
    return 1;
  }
  return RunFit(rows, options.format, out, err);
}

}  // namespace testbed
