// reduce-bench: the rate of the host reduction loop every all-reduce's
// receive-and-reduce step runs (ReduceInto, allreduce/data_type.h), on one
// core: dst[i] = op(dst[i], src[i]) over a message of --bytes, repeated.
//
//   reduce-bench [--bytes 4MiB] [--dtype float32] [--op sum] [--seconds 1]
//
// A 4 MiB message is one ring step of a 16 MiB all-reduce at N = 4. Prints one
// JSON object: {"bytes": ..., "dtype": ..., "op": ..., "reductions": ...,
// "gbps": ...}, where gbps counts the message's bytes once per reduction
// (10^9 B/s), as a step's payload is counted.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "allreduce/data_type.h"
#include "common/byte_size.h"

int main(int argc, char** argv) {
  CLI::App app{"Rate of the host reduction loop (ReduceInto) on one core."};
  std::string bytes_text = "4MiB";
  std::string dtype_text = "float32";
  std::string op_text = "sum";
  double seconds = 1.0;
  app.add_option("--bytes", bytes_text, "Message size reduced each time (e.g. 256KiB, 4MiB)")
      ->capture_default_str();
  app.add_option("--dtype", dtype_text, "Element type: " + testbed::DataTypeNames())
      ->capture_default_str();
  app.add_option("--op", op_text, "Reduction: sum, min or max")->capture_default_str();
  app.add_option("--seconds", seconds, "How long to keep reducing")
      ->check(CLI::Range(0.01, 60.0))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const absl::StatusOr<std::int64_t> bytes = testbed::ParseByteSize(bytes_text);
  const std::optional<testbed::DataType> type = testbed::ParseDataType(dtype_text);
  const std::optional<testbed::ReduceOp> op = testbed::ParseReduceOp(op_text);
  if (!bytes.ok() || *bytes <= 0 || !type || !op) {
    std::fprintf(stderr, "reduce-bench: bad --bytes, --dtype or --op (see --help)\n");
    return 2;
  }
  const std::size_t element = testbed::ElementSize(*type);
  const std::int64_t count = *bytes / static_cast<std::int64_t>(element);
  // Small values: a sum of many stays finite in every type.
  const auto size = static_cast<std::size_t>(count) * element;
  std::vector<std::byte> dst(size), src(size);
  std::memset(dst.data(), 0, dst.size());
  std::memset(src.data(), 0, src.size());

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto stop = start + std::chrono::duration<double>(seconds);
  std::uint64_t reductions = 0;
  while (Clock::now() < stop) {
    testbed::ReduceInto(*type, *op, dst.data(), src.data(), count);
    ++reductions;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("{\"bytes\": %zu, \"dtype\": \"%s\", \"op\": \"%s\", \"reductions\": %llu, "
              "\"gbps\": %.3f}\n",
              dst.size(), dtype_text.c_str(), op_text.c_str(),
              static_cast<unsigned long long>(reductions),
              static_cast<double>(dst.size()) * static_cast<double>(reductions) / elapsed / 1e9);
  return 0;
}
