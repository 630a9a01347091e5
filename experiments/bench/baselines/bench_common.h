// Shared by the baseline all-reduce benchmarks (OpenMPI, Gloo): the command
// line for a size sweep, the sizes it yields, and the JSON line printed per size.
// Metric as in nccl-tests: time per iteration is the slowest rank's,
// algbw = bytes / time, busbw = algbw * 2(N-1)/N, GB/s = 1e9 bytes/s.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/resource.h>

namespace baselines {

struct SweepOptions {
  std::int64_t min_bytes = 8;
  std::int64_t max_bytes = 16 << 20;
  double factor = 2.0;
  int iters = 20;
  int warmup = 5;
  // Free-form label copied into every JSON line ("tcp", "shm", ...).
  std::string transport;
};

// "4096", "64K", "64KiB", "16M", "16MiB", "1G", "1GiB" (binary), "8B".
inline std::optional<std::int64_t> ParseBytes(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  std::int64_t value = std::strtoll(std::string(text.substr(0, digits)).c_str(),
                                    nullptr, 10);
  std::string_view unit = text.substr(digits);
  std::int64_t scale = 1;
  if (unit.empty() || unit == "B") {
    scale = 1;
  } else if (unit == "K" || unit == "KiB") {
    scale = std::int64_t{1} << 10;
  } else if (unit == "M" || unit == "MiB") {
    scale = std::int64_t{1} << 20;
  } else if (unit == "G" || unit == "GiB") {
    scale = std::int64_t{1} << 30;
  } else {
    return std::nullopt;
  }
  return value * scale;
}

// Parses the sweep flags out of argv and leaves the rest (in order) for the
// caller. Prints a message and exits on a malformed sweep flag.
inline std::vector<std::string> ParseSweepOptions(int argc, char** argv,
                                                  SweepOptions* options) {
  std::vector<std::string> rest;
  auto need_value = [&](int& i, const char* flag) -> std::string {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", flag);
      std::exit(2);
    }
    return argv[++i];
  };
  auto bytes_value = [&](int& i, const char* flag) -> std::int64_t {
    std::string v = need_value(i, flag);
    auto parsed = ParseBytes(v);
    if (!parsed || *parsed <= 0) {
      std::fprintf(stderr, "%s: bad size '%s'\n", flag, v.c_str());
      std::exit(2);
    }
    return *parsed;
  };
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--min-bytes") {
      options->min_bytes = bytes_value(i, "--min-bytes");
    } else if (arg == "--max-bytes") {
      options->max_bytes = bytes_value(i, "--max-bytes");
    } else if (arg == "--factor") {
      options->factor = std::atof(need_value(i, "--factor").c_str());
    } else if (arg == "--iters") {
      options->iters = std::atoi(need_value(i, "--iters").c_str());
    } else if (arg == "--warmup") {
      options->warmup = std::atoi(need_value(i, "--warmup").c_str());
    } else if (arg == "--transport") {
      options->transport = need_value(i, "--transport");
      if (options->transport.find_first_of("\"\\") != std::string::npos) {
        std::fprintf(stderr, "--transport: no quotes or backslashes\n");
        std::exit(2);
      }
    } else {
      rest.emplace_back(arg);
    }
  }
  if (options->factor <= 1.0 || options->iters < 1 || options->warmup < 0 ||
      options->min_bytes > options->max_bytes) {
    std::fprintf(stderr,
                 "need --factor > 1, --iters >= 1, --warmup >= 0, "
                 "--min-bytes <= --max-bytes\n");
    std::exit(2);
  }
  return rest;
}

// Message sizes in bytes, each a multiple of sizeof(float) (rounded down, at
// least one float), from min_bytes up to max_bytes multiplying by factor.
inline std::vector<std::int64_t> SweepSizes(const SweepOptions& options) {
  std::vector<std::int64_t> sizes;
  double bytes = static_cast<double>(options.min_bytes);
  while (bytes <= static_cast<double>(options.max_bytes) * (1 + 1e-9)) {
    std::int64_t b = static_cast<std::int64_t>(bytes + 0.5);
    b = std::max<std::int64_t>(4, b / 4 * 4);
    if (sizes.empty() || sizes.back() != b) sizes.push_back(b);
    bytes *= options.factor;
  }
  return sizes;
}

// Rank r contributes r+1 in every element; the sum is N(N+1)/2, exact in float.
inline float Contribution(int rank) { return static_cast<float>(rank + 1); }
inline float ExpectedSum(int workers) {
  return static_cast<float>(workers * (workers + 1) / 2);
}

inline std::int64_t CountWrong(const float* data, std::int64_t count,
                               float expected) {
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < count; ++i) wrong += (data[i] != expected);
  return wrong;
}

// Minor page faults this process has taken so far (first touches of fresh
// pages: what glibc's malloc of a large temporary costs on every call).
inline double MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_minflt);
}

// The nearest-rank percentile q of `times` (sorted): the smallest time at
// least a fraction q of iterations reach - the testbed's rows use the same
// rule (proto/result_aggregator.cc), so medians compare like with like.
inline double NearestRank(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

// One JSON object on one line. `slowest_us[i]` is iteration i's time on its
// slowest rank; `faults_per_iter` is the largest over ranks of the minor page
// faults per timed iteration (barrier included; 0 when buffers are reused).
inline void PrintResult(const char* baseline, const char* algorithm,
                        const SweepOptions& options, int workers,
                        std::int64_t bytes,
                        const std::vector<double>& slowest_us,
                        std::int64_t wrong, double faults_per_iter) {
  std::vector<double> sorted = slowest_us;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double t : sorted) sum += t;
  const double avg = sum / static_cast<double>(sorted.size());
  const double algbw = static_cast<double>(bytes) / (avg * 1e-6) / 1e9;
  const double busbw = algbw * 2.0 * (workers - 1) / workers;
  std::printf(
      "{\"baseline\": \"%s\", \"algorithm\": \"%s\", \"transport\": \"%s\", "
      "\"workers\": %d, \"bytes\": %lld, \"iterations\": %zu, "
      "\"time_us_avg\": %.3f, \"time_us_min\": %.3f, \"time_us_p50\": %.3f, "
      "\"time_us_p99\": %.3f, \"time_us_max\": %.3f, "
      "\"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, \"wrong\": %lld, "
      "\"page_faults_per_iter\": %.1f}\n",
      baseline, algorithm, options.transport.c_str(), workers,
      static_cast<long long>(bytes), sorted.size(), avg, sorted.front(),
      NearestRank(sorted, 0.5), NearestRank(sorted, 0.99), sorted.back(), algbw,
      busbw, static_cast<long long>(wrong), faults_per_iter);
  std::fflush(stdout);
}

}  // namespace baselines
