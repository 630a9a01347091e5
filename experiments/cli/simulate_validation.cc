#include "experiments/cli/simulate_validation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/link_units.h"
#include "allreduce/collective.h"
#include "common/byte_size.h"
#include "experiments/cli/simulate_command.h"
#include "proto/fabric_spec.h"
#include "proto/spec.h"

namespace testbed {
namespace {

// One measured row and the spec, for its N, that it ran under.
struct Measured {
  proto::ExperimentSpec spec;
  proto::ResultRow row;
  bool ps = false;
};

absl::StatusOr<std::vector<Measured>> MeasuredPoints(const std::vector<RecordedRun>& runs) {
  std::vector<Measured> points;
  for (const RecordedRun& run : runs) {
    for (const proto::ResultRow& row : run.rows) {
      if (row.transport() == kSimulatedTransport) continue;  // not a measurement
      const auto refuse = [&](auto&&... why) {
        return absl::InvalidArgumentError(absl::StrCat("run '", run.spec.name(), "' (",
                                                       run.deployment, "): ", why...));
      };
      if (run.spec.network() != proto::Network::netns || run.spec.link_rate_bps() == 0) {
        return refuse("no shaped links to simulate (it needs --network netns and a link rate)");
      }
      if (row.segment_bytes() != 0) {
        return refuse(row.algorithm(), " at ", row.bytes(), " bytes ran in segments, which are "
                      "not simulated yet");
      }
      if (row.time_us_p50() <= 0) return refuse(row.algorithm(), " has no median time");
      if (!row.split().empty()) {
        return refuse("its rows are groups of split '", row.split(), "'; simulate the same spec "
                      "(testbed simulate --split) to compare them");
      }
      Measured m{run.spec, row, RunsOnParameterServer(row.algorithm())};
      m.spec.set_workers(row.workers());
      m.spec.clear_worker_counts();
      points.push_back(std::move(m));
    }
  }
  return points;
}

absl::StatusOr<double> SimulatedUs(const Measured& m, double alpha_us, double host_ns_per_byte) {
  proto::ExperimentSpec spec = m.spec;
  spec.set_model_alpha_us(alpha_us);
  spec.set_model_host_ns_per_byte(host_ns_per_byte);
  absl::StatusOr<proto::ResultRow> row = SimulateRow(spec, m.row.algorithm(), m.row.bytes());
  if (!row.ok()) return row.status();
  return row->time_us_avg();
}

// Sum of squared log ratios of simulated to measured over `points` at `alpha_us`.
absl::StatusOr<double> LogError(const std::vector<const Measured*>& points, double alpha_us,
                                double host_ns_per_byte) {
  double sum = 0;
  for (const Measured* m : points) {
    absl::StatusOr<double> simulated = SimulatedUs(*m, alpha_us, host_ns_per_byte);
    if (!simulated.ok()) return simulated.status();
    const double log_ratio = std::log(*simulated / m->row.time_us_p50());
    sum += log_ratio * log_ratio;
  }
  return sum;
}

// Golden-section search for alpha in 0 .. 20 ms: each point's simulated time
// rises with alpha, so the squared log error has one minimum.
absl::StatusOr<double> FitAlphaUs(const std::vector<const Measured*>& points,
                                  double host_ns_per_byte) {
  const double ratio = (std::sqrt(5.0) - 1) / 2;
  double lo = 0, hi = 20000;
  for (int i = 0; i < 60 && hi - lo > 0.01; ++i) {
    const double a = hi - ratio * (hi - lo);
    const double b = lo + ratio * (hi - lo);
    absl::StatusOr<double> fa = LogError(points, a, host_ns_per_byte);
    absl::StatusOr<double> fb = LogError(points, b, host_ns_per_byte);
    if (!fa.ok()) return fa.status();
    if (!fb.ok()) return fb.status();
    if (*fa < *fb) {
      hi = b;  // the minimum is left of b
    } else {
      lo = a;
    }
  }
  return (lo + hi) / 2;
}

double Geomean(const std::vector<double>& errors) {
  if (errors.empty()) return 0;
  double sum = 0;
  for (double e : errors) sum += std::log(std::max(std::abs(e), 1e-4));
  return std::exp(sum / static_cast<double>(errors.size()));
}

AlgorithmError Summarize(const std::string& name, const std::string& link,
                         const std::vector<const ValidationPoint*>& points) {
  AlgorithmError summary{name, link};
  std::vector<double> large, small;
  for (const ValidationPoint* p : points) {
    ++summary.points;
    (p->bytes >= kCalibrationBytes ? large : small).push_back(p->error());
    summary.worst = std::max(summary.worst, std::abs(p->error()));
  }
  summary.large = static_cast<int>(large.size());
  summary.large_geomean = Geomean(large);
  summary.small = static_cast<int>(small.size());
  summary.small_geomean = Geomean(small);
  return summary;
}

}  // namespace

absl::StatusOr<Validation> ValidateSimulator(const std::vector<RecordedRun>& runs,
                                             std::optional<double> alpha_us,
                                             double host_ns_per_byte) {
  absl::StatusOr<std::vector<Measured>> measured = MeasuredPoints(runs);
  if (!measured.ok()) return measured.status();
  if (measured->empty()) return absl::InvalidArgumentError("no measured rows to simulate");
  Validation v;
  for (bool ps : {false, true}) {
    double& alpha = ps ? v.calibration.ps_alpha_us : v.calibration.schedules_alpha_us;
    int& fitted_to = ps ? v.calibration.ps_points : v.calibration.schedules_points;
    std::vector<const Measured*> small;
    for (const Measured& m : *measured) {
      if (m.ps == ps && m.row.bytes() < kCalibrationBytes) small.push_back(&m);
    }
    if (alpha_us || small.empty()) {
      alpha = alpha_us.value_or(kDefaultModelAlphaUs);
      continue;
    }
    absl::StatusOr<double> fit = FitAlphaUs(small, host_ns_per_byte);
    if (!fit.ok()) return fit.status();
    alpha = *fit;
    fitted_to = static_cast<int>(small.size());
  }
  std::map<std::string, std::vector<const ValidationPoint*>> by_algorithm;
  v.points.reserve(measured->size());
  for (const Measured& m : *measured) {
    const double alpha = m.ps ? v.calibration.ps_alpha_us : v.calibration.schedules_alpha_us;
    absl::StatusOr<double> simulated = SimulatedUs(m, alpha, host_ns_per_byte);
    if (!simulated.ok()) return simulated.status();
    v.points.push_back({m.row.algorithm(), static_cast<int>(m.row.workers()), m.row.bytes(),
                        FabricSummary(m.spec.fabric()), FormatLinkRate(m.spec.link_rate_bps()),
                        m.row.time_us_p50(), *simulated});
  }
  std::vector<std::string> links;
  std::map<std::string, std::vector<const ValidationPoint*>> by_link;
  std::vector<const ValidationPoint*> all;
  for (const ValidationPoint& p : v.points) {
    if (by_link.count(p.link) == 0) links.push_back(p.link);
    by_link[p.link].push_back(&p);
    by_algorithm[p.link + " " + p.algorithm].push_back(&p);
    all.push_back(&p);
  }
  for (const std::string& link : links) {
    // In the registry's order, as every table lists algorithms.
    for (const Collective& c : AllCollectives()) {
      auto it = by_algorithm.find(link + " " + std::string(c.name));
      if (it != by_algorithm.end()) {
        v.by_algorithm.push_back(Summarize(std::string(c.name), link, it->second));
      }
    }
    v.by_algorithm.push_back(Summarize("all", link, by_link[link]));
  }
  v.all = Summarize("all", "", all);
  return v;
}

void PrintValidation(const Validation& v, const std::string& source, std::ostream& out) {
  const auto alpha = [](double us, int points) {
    return points > 0 ? absl::StrFormat("%.0f us (fitted to %d points under 1 MiB)", us, points)
                      : absl::StrFormat("%.0f us (given)", us);
  };
  out << "# The simulator against measured runs\n\n"
      << "Measured: " << source << ". Simulated: `testbed simulate`'s model (docs/simulator.md),\n"
      << "alpha per message " << alpha(v.calibration.schedules_alpha_us, v.calibration.schedules_points)
      << " for the schedules, per stream "
      << alpha(v.calibration.ps_alpha_us, v.calibration.ps_points) << " for ps.\n"
      << "Error: simulated / measured median - 1; geomean: the geometric mean of |error|.\n\n"
      << "| link | algorithm | points | geomean >= 1 MiB | geomean < 1 MiB | worst |\n"
      << "|---|---|---:|---:|---:|---:|\n";
  const auto pct = [](double e) { return absl::StrFormat("%.1f%%", 100 * e); };
  std::vector<AlgorithmError> rows = v.by_algorithm;
  rows.push_back(v.all);
  for (const AlgorithmError& a : rows) {
    out << "| " << (a.link.empty() ? "every" : a.link) << " | " << a.algorithm << " | "
        << a.points << " | "
        << (a.large > 0 ? pct(a.large_geomean) : "–") << " | "
        << (a.small > 0 ? pct(a.small_geomean) : "–") << " | " << pct(a.worst) << " |\n";
  }
  out << "\n| link | algorithm | N | fabric | size | measured p50 | simulated | error |\n"
      << "|---|---|---:|---|---:|---:|---:|---:|\n";
  for (const ValidationPoint& p : v.points) {
    out << "| " << p.link << " | " << p.algorithm << " | " << p.workers << " | " << p.fabric
        << " | "
        << FormatByteSize(p.bytes) << " | " << absl::StrFormat("%.0f us", p.measured_us) << " | "
        << absl::StrFormat("%.0f us", p.simulated_us) << " | "
        << absl::StrFormat("%+.1f%%", 100 * p.error()) << " |\n";
  }
}

}  // namespace testbed
