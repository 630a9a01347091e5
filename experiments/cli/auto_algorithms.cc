#include "experiments/cli/auto_algorithms.h"

#include <algorithm>
#include <map>

#include "proto/enum_text.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allreduce/collective.h"
#include "experiments/results/row_fits.h"
#include "proto/spec.h"

namespace testbed {
namespace {

// Calibration stays short: beta is fitted from messages up to this size and
// the model carries it to larger ones.
constexpr std::int64_t kCalibrationCapBytes = std::int64_t{4} << 20;

// `name`'s times per size, from the rows that ran what `spec` will run.
std::vector<MeasuredTime> MeasuredTimes(const std::vector<proto::ResultRow>& rows,
                                        const std::string& name,
                                        const proto::ExperimentSpec& spec) {
  const Collective* collective = FindCollective(name);
  const bool ps = collective != nullptr && collective->runs_on_parameter_server();
  std::map<std::int64_t, std::vector<double>> by_size;
  for (const proto::ResultRow& row : rows) {
    if (row.algorithm() != name || row.workers() != spec.workers() ||
        (!row.dtype().empty() && row.dtype() != EnumText(spec.dtype())) ||
        (ps && row.servers() != spec.servers())) {
      continue;
    }
    by_size[row.bytes()].push_back(RowTimeUs(row, FitTime::kMedian));
  }
  std::vector<MeasuredTime> measured;
  for (auto& [bytes, times] : by_size) {
    std::sort(times.begin(), times.end());
    const std::size_t mid = times.size() / 2;
    const double median = times.size() % 2 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
    measured.push_back({bytes, median});
  }
  return measured;
}

}  // namespace

bool NamesAuto(const proto::ExperimentSpec& spec) {
  return std::find(spec.algorithms().begin(), spec.algorithms().end(), kAutoAlgorithm) !=
         spec.algorithms().end();
}

std::vector<std::string> AutoCandidates(const proto::ExperimentSpec& spec) {
  std::vector<std::string> names;
  for (const Collective* c : CollectivesOf(Kinds::kDefaultAllReduce)) {
    if (c->runs_on_parameter_server() && !ParameterServerCanReduce(spec)) continue;
    names.emplace_back(c->name);
  }
  return names;
}

proto::ExperimentSpec CalibrationSpec(const proto::ExperimentSpec& spec) {
  proto::ExperimentSpec calibration = spec;
  calibration.set_name(absl::StrCat(spec.name(), spec.name().empty() ? "" : " ",
                                    "(calibration for auto)"));
  calibration.clear_algorithms();
  for (const std::string& name : AutoCandidates(spec)) calibration.add_algorithms(name);
  calibration.clear_sizes();
  const std::vector<std::int64_t> sizes(spec.sizes().begin(), spec.sizes().end());
  for (std::int64_t bytes : CalibrationSizes(sizes, ElementBytes(spec), kCalibrationCapBytes)) {
    calibration.add_sizes(bytes);
  }
  calibration.set_iterations(10);
  calibration.set_warmup(2);
  return calibration;
}

absl::StatusOr<std::vector<FittedAlgorithm>> FitCandidates(
    const std::vector<proto::ResultRow>& rows, const std::vector<std::string>& candidates,
    const proto::ExperimentSpec& spec, std::ostream& log) {
  absl::StatusOr<std::vector<RowFit>> fits = FitRows(rows, log, FitTime::kMedian);
  if (!fits.ok()) return fits.status();
  std::vector<FittedAlgorithm> fitted;
  std::vector<std::string> missing;
  for (const std::string& name : candidates) {
    std::vector<const RowFit*> of_name;
    for (const RowFit& fit : *fits) {
      if (fit.algorithm == name) of_name.push_back(&fit);
    }
    if (of_name.size() > 1) {
      std::vector<std::string> transports;
      for (const RowFit* fit : of_name) transports.push_back(fit->transport);
      return absl::InvalidArgumentError(absl::StrCat(
          "the tuning rows hold ", name, " over ", of_name.size(), " transports (",
          absl::StrJoin(transports, ", "), "): give the results of one cluster"));
    }
    if (of_name.empty() || !of_name.front()->fit.ok()) {
      log << "auto: leaves out " << name << ": "
          << (of_name.empty() ? std::string("no rows of it")
                              : std::string(of_name.front()->fit.status().message()))
          << "\n";
      missing.push_back(name);
      continue;
    }
    fitted.push_back({name, of_name.front()->fit->link, MeasuredTimes(rows, name, spec)});
  }
  if (fitted.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "auto: no all-reduce could be fitted (", absl::StrJoin(missing, ", "),
        "): each needs rows at 2 or more sizes on this cluster"));
  }
  return fitted;
}

std::vector<ResolvedSubmission> ResolveAuto(const proto::ExperimentSpec& spec,
                                            const std::vector<AlgorithmChoice>& choices,
                                            std::string_view source) {
  std::vector<ResolvedSubmission> submissions;
  proto::ExperimentSpec named = spec;
  named.clear_algorithms();
  for (const std::string& name : spec.algorithms()) {
    if (name != kAutoAlgorithm) named.add_algorithms(name);
  }
  if (!named.algorithms().empty()) submissions.push_back({named, {}});
  // One submission per chosen algorithm, in the order of first choice.
  for (const AlgorithmChoice& choice : choices) {
    auto same = std::find_if(submissions.begin(), submissions.end(), [&](const auto& s) {
      return !s.chosen_by.empty() && s.spec.algorithms(0) == choice.algorithm;
    });
    if (same == submissions.end()) {
      proto::ExperimentSpec chosen = spec;
      chosen.clear_algorithms();
      chosen.add_algorithms(choice.algorithm);
      chosen.clear_sizes();
      submissions.push_back({chosen, {}});
      same = submissions.end() - 1;
    }
    same->spec.add_sizes(choice.bytes);
    same->chosen_by[choice.bytes] = DescribeChoice(choice, source);
  }
  return submissions;
}

}  // namespace testbed
