#include "experiments/results/training_table.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allreduce/collective.h"
#include "allreduce/cost_model.h"
#include "common/byte_size.h"
#include "common/link_units.h"
#include "experiments/results/json_lines.h"

namespace testbed {
namespace {

// Keeps the TrainingRows among a file's lines in `rows`.
std::function<absl::Status(const std::string&)> KeepTrainingRows(
    std::vector<proto::TrainingRow>& rows) {
  return [&rows](const std::string& line) -> absl::Status {
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;
    // Any JSON object first: an experiment's records share some field names
    // with other types, so only a line whose kind is a training row's is
    // parsed as one.
    google::protobuf::Struct probe;
    if (auto st = google::protobuf::util::JsonStringToMessage(line, &probe, options); !st.ok()) {
      return absl::InvalidArgumentError(st.message().as_string());
    }
    const auto kind = probe.fields().find("kind");
    if (kind == probe.fields().end() ||
        (kind->second.string_value() != "PROGRESS" && kind->second.string_value() != "RUN")) {
      return absl::OkStatus();
    }
    proto::TrainingRow row;
    if (auto st = google::protobuf::util::JsonStringToMessage(line, &row, options); !st.ok()) {
      return absl::InvalidArgumentError(st.message().as_string());
    }
    rows.push_back(std::move(row));
    return absl::OkStatus();
  };
}

// One run as the table measures it: its RUN row, and the interval it is
// timed by (the last progress row, or the RUN row itself).
struct MeasuredRun {
  proto::TrainingRow run;
  proto::TrainingRow steady;
  std::uint64_t first_step = 1;  // of the steady interval
};

std::string SchemeName(const proto::TrainingRow& row) {
  if (!row.scheme().empty()) return row.scheme();
  std::string name = row.sync();
  if (RunsOnParameterServer(row.sync())) absl::StrAppend(&name, "-S", row.servers());
  if (row.bucket_bytes() > 0) absl::StrAppend(&name, "+bucket");
  if (row.overlap()) absl::StrAppend(&name, "+overlap");
  if (!row.compress().empty() && row.compress() != "none") absl::StrAppend(&name, "+", row.compress());
  return name;
}

std::string ModelName(const proto::TrainingRow& row) {
  const std::string layers = absl::StrJoin(row.layer_sizes(), "-");
  return row.model().empty() ? layers : absl::StrCat(row.model(), " (", layers, ")");
}

std::string LinkName(const proto::TrainingRow& row) {
  if (!row.link_rate().empty()) return row.link_rate();
  return row.network().empty() ? "threads" : row.network();
}

std::vector<MeasuredRun> MeasuredRuns(const std::vector<proto::TrainingRow>& rows) {
  std::vector<MeasuredRun> runs;
  std::optional<proto::TrainingRow> last_progress;
  std::uint64_t previous_step = 0;
  for (const proto::TrainingRow& row : rows) {
    if (row.kind() == proto::TrainingRow::PROGRESS) {
      previous_step = last_progress ? last_progress->step() : 0;
      last_progress = row;
      continue;
    }
    if (row.kind() != proto::TrainingRow::RUN) continue;
    MeasuredRun measured{.run = row, .steady = last_progress.value_or(row)};
    measured.first_step = last_progress ? previous_step + 1 : 1;
    runs.push_back(std::move(measured));
    last_progress.reset();
    previous_step = 0;
  }
  return runs;
}

// The seconds the alpha-beta model's bandwidth term gives the gradient's
// synchronisation on the run's link: each bucket's collective (or push and
// pull through S shards), on the busiest link. Empty where the row does not
// say its link or the scheme has no closed form (top-k's all-gather).
std::optional<double> LinkModelSeconds(const proto::TrainingRow& row) {
  const absl::StatusOr<double> rate = ParseLinkRate(row.link_rate());
  if (row.link_rate().empty() || !rate.ok()) return std::nullopt;
  std::int64_t element_size = 4;
  if (row.compress() == "fp16") {
    element_size = 2;
  } else if (!row.compress().empty() && row.compress() != "none") {
    return std::nullopt;
  }
  const std::int64_t elements = row.parameters();
  const std::int64_t per_bucket =
      row.bucket_bytes() == 0 ? elements
                              : std::max<std::int64_t>(1, static_cast<std::int64_t>(
                                                              row.bucket_bytes() / 4));
  const LinkModel link{.alpha_s = 0, .beta_s_per_byte = 8.0 / *rate};
  double seconds = 0;
  for (std::int64_t offset = 0; offset < elements; offset += per_bucket) {
    const std::int64_t count = std::min(per_bucket, elements - offset);
    const absl::StatusOr<CostEstimate> estimate =
        EstimateAlgorithm(row.sync(), static_cast<int>(row.workers()),
                          std::max<int>(1, static_cast<int>(row.servers())),
                          count * element_size, element_size, link);
    if (!estimate.ok()) return std::nullopt;
    seconds += estimate->time_s;
  }
  return seconds;
}

std::string Milliseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, seconds >= 0.1 ? "%.0f ms" : "%.1f ms", seconds * 1e3);
  return text;
}

std::string Times(double ratio) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f×", ratio);
  return text;
}

std::string Bottleneck(const proto::TrainingRow& row) {
  const Collective* c = FindCollective(row.sync());
  if (c == nullptr) return "";
  std::string text(c->bottleneck);
  if (c->runs_on_parameter_server()) absl::StrAppend(&text, " (S = ", row.servers(), ")");
  return text;
}

// (link, model, N) in the order the rows first name them, then scheme.
using GroupKey = std::tuple<int, int, std::uint32_t>;

struct Groups {
  std::vector<std::string> links, models;
  std::map<GroupKey, std::vector<MeasuredRun>> runs;
};

int IndexOf(std::vector<std::string>& names, const std::string& name) {
  const auto at = std::find(names.begin(), names.end(), name);
  if (at != names.end()) return static_cast<int>(at - names.begin());
  names.push_back(name);
  return static_cast<int>(names.size()) - 1;
}

Groups GroupRuns(const std::vector<MeasuredRun>& runs) {
  Groups groups;
  for (const MeasuredRun& measured : runs) {
    const GroupKey key{IndexOf(groups.links, LinkName(measured.run)),
                       IndexOf(groups.models, ModelName(measured.run)), measured.run.workers()};
    std::vector<MeasuredRun>& group = groups.runs[key];
    const auto same = std::find_if(group.begin(), group.end(), [&](const MeasuredRun& m) {
      return SchemeName(m.run) == SchemeName(measured.run);
    });
    if (same != group.end()) {
      *same = measured;  // a later run replaces an earlier one
    } else {
      group.push_back(measured);
    }
  }
  return groups;
}

const MeasuredRun& Fastest(const std::vector<MeasuredRun>& group) {
  return *std::min_element(group.begin(), group.end(), [](const auto& a, const auto& b) {
    return a.steady.step_seconds() < b.steady.step_seconds();
  });
}

// "ring+bucket (1.31× ahead of ps-SN)": the fastest and its lead on the next.
std::string WinnerCell(const std::vector<MeasuredRun>& group) {
  const MeasuredRun& best = Fastest(group);
  const MeasuredRun* second = nullptr;
  for (const MeasuredRun& m : group) {
    if (&m == &best) continue;
    if (second == nullptr || m.steady.step_seconds() < second->steady.step_seconds()) second = &m;
  }
  std::string cell = absl::StrCat(SchemeName(best.run), ", ", Milliseconds(best.steady.step_seconds()));
  if (second != nullptr && best.steady.step_seconds() > 0) {
    absl::StrAppend(&cell, " (", Times(second->steady.step_seconds() / best.steady.step_seconds()),
                    " ahead of ", SchemeName(second->run), ")");
  }
  return cell;
}

void PrintSummary(const Groups& groups, std::ostream& out) {
  std::vector<std::uint32_t> worker_counts;
  for (const auto& [key, group] : groups.runs) {
    if (std::find(worker_counts.begin(), worker_counts.end(), std::get<2>(key)) ==
        worker_counts.end()) {
      worker_counts.push_back(std::get<2>(key));
    }
  }
  std::sort(worker_counts.begin(), worker_counts.end());
  out << "\n## The fastest scheme per link, model and N\n\n"
      << "Mean step time of the steady interval; in brackets how much slower the runner-up "
         "is.\n\n| link | model |";
  for (std::uint32_t n : worker_counts) out << " N = " << n << " |";
  out << "\n|---|---|";
  for (std::size_t i = 0; i < worker_counts.size(); ++i) out << "---|";
  out << "\n";
  for (int link = 0; link < static_cast<int>(groups.links.size()); ++link) {
    for (int model = 0; model < static_cast<int>(groups.models.size()); ++model) {
      std::string line = absl::StrCat("| ", groups.links[link], " | ", groups.models[model], " |");
      bool any = false;
      for (std::uint32_t n : worker_counts) {
        const auto group = groups.runs.find({link, model, n});
        if (group == groups.runs.end()) {
          absl::StrAppend(&line, " – |");
          continue;
        }
        any = true;
        absl::StrAppend(&line, " ", WinnerCell(group->second), " |");
      }
      if (any) out << line << "\n";
    }
  }
}

void PrintGroup(const std::string& link, const std::string& model,
                const std::vector<MeasuredRun>& group, std::ostream& out) {
  const MeasuredRun& first = group.front();
  out << "\n## " << link << ", " << model << ", N = " << first.run.workers() << "\n\n"
      << first.run.parameters() << " parameters (a "
      << HumanByteSize(static_cast<double>(first.run.dense_gradient_bytes()))
      << " float32 gradient); timed over steps " << first.first_step << "–"
      << first.steady.step() << ".\n\n"
      << "| scheme | step | compute | exposed comm. | hidden comm. | worker 0 bytes / step | "
         "link model | × fastest | bottleneck |\n"
      << "|---|---:|---:|---:|---:|---:|---:|---:|---|\n";
  const double fastest = Fastest(group).steady.step_seconds();
  for (const MeasuredRun& m : group) {
    const proto::TrainingRow& row = m.steady;
    const std::optional<double> model_seconds = LinkModelSeconds(m.run);
    out << "| " << SchemeName(m.run) << " | " << Milliseconds(row.step_seconds()) << " | "
        << Milliseconds(row.compute_seconds()) << " | "
        << Milliseconds(row.communication_seconds()) << " | "
        << Milliseconds(row.overlapped_communication_seconds()) << " | "
        << HumanByteSize(static_cast<double>(row.payload_bytes())) << " | "
        << (model_seconds ? Milliseconds(*model_seconds) : "–") << " | "
        << (fastest > 0 ? Times(row.step_seconds() / fastest) : "–") << " | "
        << Bottleneck(m.run) << " |\n";
  }
}

}  // namespace

absl::StatusOr<std::vector<proto::TrainingRow>> ReadTrainingRows(std::istream& in) {
  std::vector<proto::TrainingRow> rows;
  if (absl::Status st = ForEachJsonLine(in, KeepTrainingRows(rows)); !st.ok()) return st;
  return rows;
}

absl::StatusOr<std::vector<proto::TrainingRow>> ReadTrainingFiles(
    const std::vector<std::string>& files) {
  std::vector<proto::TrainingRow> rows;
  if (absl::Status st = ForEachJsonLineOfFiles(files, KeepTrainingRows(rows)); !st.ok()) {
    return st;
  }
  return rows;
}

absl::Status PrintTrainingTable(const std::vector<proto::TrainingRow>& rows, std::ostream& out) {
  const std::vector<MeasuredRun> runs = MeasuredRuns(rows);
  if (runs.empty()) return absl::NotFoundError("no training runs (RUN rows)");
  const Groups groups = GroupRuns(runs);
  out << "# Training step time per synchronisation scheme\n\n"
      << "Per step, worker 0's means over the steady interval: compute (forward and backward), "
         "exposed communication (after the backward pass), hidden communication (during it, "
         "with overlap), and the bytes worker 0 sent and received. Link model: the alpha-beta "
         "model's bandwidth term for the gradient's synchronisation on the run's link (each "
         "bucket's collective, or the push and pull through S shards), from the same closed "
         "forms as the course table.\n";
  PrintSummary(groups, out);
  for (const auto& [key, group] : groups.runs) {
    PrintGroup(groups.links[std::get<0>(key)], groups.models[std::get<1>(key)], group, out);
  }
  return absl::OkStatus();
}

}  // namespace testbed
