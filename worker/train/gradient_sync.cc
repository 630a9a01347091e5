#include "worker/train/gradient_sync.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/optimizer.h"

namespace testbed {

absl::StatusOr<proto::Optimizer> OptimizerConfig(const std::string& name, double learning_rate,
                                                 double momentum) {
  proto::Optimizer config;
  proto::Optimizer::Kind kind;
  // "none" is a rule of the server, but it trains nothing.
  if (!proto::Optimizer::Kind_Parse(absl::AsciiStrToUpper(name), &kind) ||
      kind == proto::Optimizer::NONE) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown optimizer '", name, "' (choose from sgd, momentum, adam)"));
  }
  config.set_kind(kind);
  config.set_learning_rate(learning_rate);
  config.set_momentum(momentum);
  config.set_average(true);
  return config;
}

}  // namespace testbed
