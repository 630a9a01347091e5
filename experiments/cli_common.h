// Pieces every `testbed` subcommand shares: validators that turn bad input
// into one clear line naming the accepted values.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "allreduce/collective.h"
#include "allreduce/data_type.h"
#include "experiments/byte_size.h"
#include "experiments/table.h"

namespace testbed {

// Accepts a collective's name; all_reduce_only limits it to the four algorithms.
inline CLI::Validator CollectiveValidator(bool all_reduce_only) {
  return CLI::Validator(
      [all_reduce_only](std::string& name) -> std::string {
        const Collective* c = FindCollective(name);
        if (c != nullptr && (!all_reduce_only || c->is_all_reduce())) return "";
        return "unknown algorithm '" + name + "' (choose from " +
               CollectiveNames(all_reduce_only) + ")";
      },
      all_reduce_only ? "ALGORITHM" : "COLLECTIVE");
}

// Accepts the parameter server and the four all-reduce algorithms: what
// `testbed local`, `run` and `model` can run or predict.
inline CLI::Validator AlgorithmValidator() {
  return CLI::Validator(
      [](std::string& name) -> std::string {
        if (name == kParameterServer) return "";
        const Collective* c = FindCollective(name);
        if (c != nullptr && c->is_all_reduce()) return "";
        return "unknown algorithm '" + name + "' (choose from " + std::string(kParameterServer) +
               ", " + CollectiveNames(/*all_reduce_only=*/true) + ")";
      },
      "ALGORITHM");
}

// Accepts what `parse` accepts; otherwise says why, in parse's words.
template <typename T>
CLI::Validator StatusValidator(absl::StatusOr<T> (*parse)(std::string_view), const char* name) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        auto parsed = parse(text);
        return parsed.ok() ? "" : std::string(parsed.status().message());
      },
      name);
}

inline CLI::Validator ByteSizeValidator() { return StatusValidator(&ParseByteSize, "SIZE"); }

inline CLI::Validator DataTypeValidator() {
  return CLI::IsMember({"float32", "float64", "int32"});
}

// The -n/--workers and -b/--bytes options of the commands that read schedules
// without running them (traffic, model).
inline void AddWorkersAndBytes(CLI::App& cmd, int& workers, std::string& bytes) {
  cmd.add_option("-n,--workers", workers, "Number of workers N (ranks)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd.add_option("-b,--bytes", bytes,
                 "Vector size M per worker: 4096, 64KiB, 16MiB, 1GiB, 64K (binary), 1MB")
      ->check(ByteSizeValidator())
      ->capture_default_str();
}

inline CLI::Validator FormatValidator() { return CLI::IsMember({"table", "csv", "json"}); }

}  // namespace testbed
