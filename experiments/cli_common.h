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

inline CLI::Validator ByteSizeValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        auto parsed = ParseByteSize(text);
        return parsed.ok() ? "" : std::string(parsed.status().message());
      },
      "SIZE");
}

inline CLI::Validator DataTypeValidator() {
  return CLI::IsMember({"float32", "float64", "int32"});
}

inline CLI::Validator FormatValidator() { return CLI::IsMember({"table", "csv", "json"}); }

}  // namespace testbed
