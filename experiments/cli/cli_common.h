// Pieces every `testbed` subcommand shares: validators that turn bad input
// into one clear line naming the accepted values.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "allreduce/algorithm_choice.h"
#include "allreduce/collective.h"
#include "allreduce/data_type.h"
#include "common/byte_size.h"
#include "common/limits.h"
#include "experiments/results/table.h"

namespace testbed {

// Accepts the name of a registry entry of `kinds`; otherwise lists them.
inline CLI::Validator CollectiveValidator(Kinds kinds) {
  return CLI::Validator(
      [kinds](std::string& name) -> std::string {
        if (FindCollective(name, kinds) != nullptr) return "";
        return "unknown algorithm '" + name + "' (choose from " + CollectiveNames(kinds) + ")";
      },
      "ALGORITHM");
}

// What `testbed local`, `run` and `model` can run or predict: every entry.
inline CLI::Validator AlgorithmValidator() { return CollectiveValidator(Kinds::kAll); }

// What an experiment (`local`, `run`) can name: every entry, or auto.
inline CLI::Validator ExperimentAlgorithmValidator() {
  return CLI::Validator(
      [](std::string& name) -> std::string {
        if (name == kAutoAlgorithm || FindCollective(name) != nullptr) return "";
        return "unknown algorithm '" + name + "' (choose from " + CollectiveNames(Kinds::kAll) +
               ", auto)";
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

// The -n/--workers and -b/--bytes options of the commands that read schedules
// without running them (traffic, model).
inline void AddWorkersAndBytes(CLI::App& cmd, int& workers, std::string& bytes) {
  cmd.add_option("-n,--workers", workers, "Number of workers N (ranks)")
      ->check(CLI::Range(1, kMaxWorkers))
      ->capture_default_str();
  cmd.add_option("-b,--bytes", bytes,
                 "Vector size M per worker: 4096, 64KiB, 16MiB, 1GiB, 64K (binary), 1MB")
      ->check(ByteSizeValidator())
      ->capture_default_str();
}

}  // namespace testbed
