// Each optimizer rule on its own, without a store: against values computed by
// hand over a few steps (Adam's with its bias correction), chunk by chunk as
// the store applies them, and the registry's names.
#include "common/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"

namespace testbed {
namespace {

proto::Optimizer Config(double lr, double momentum = 0) {
  proto::Optimizer config;
  config.set_learning_rate(lr);
  config.set_momentum(momentum);
  return config;
}

std::unique_ptr<Optimizer> Make(std::string_view name, const proto::Optimizer& config,
                                std::int64_t count) {
  absl::StatusOr<std::unique_ptr<Optimizer>> rule = MakeOptimizer(name, config);
  EXPECT_TRUE(rule.ok()) << rule.status();
  if (!rule.ok()) return nullptr;
  (*rule)->Prepare(count);
  return *std::move(rule);
}

// Runs `steps` of `rule` over a slice starting at zero, as the store does (the
// previous step's values in, the new ones out), in chunks of `chunk` elements;
// returns the values after each step.
template <typename T>
std::vector<std::vector<T>> Steps(Optimizer& rule, const std::vector<std::vector<T>>& gradients,
                                  std::size_t chunk) {
  std::vector<std::vector<T>> out;
  std::vector<T> previous(gradients.front().size(), T{0});
  for (const std::vector<T>& g : gradients) {
    rule.BeginStep();
    std::vector<T> values(g.size());
    for (std::size_t at = 0; at < g.size(); at += chunk) {
      const std::size_t n = std::min(chunk, g.size() - at);
      rule.Apply(static_cast<std::int64_t>(at), std::span<const T>(g).subspan(at, n),
                 previous.data() + at, values.data() + at);
    }
    out.push_back(values);
    previous = values;
  }
  return out;
}

TEST(OptimizerTest, EveryKindTheProtoNamesHasARuleAndNoRuleLacksOne) {
  std::vector<std::string> kinds;
  const auto* kind = proto::Optimizer::Kind_descriptor();
  for (int i = 0; i < kind->value_count(); ++i) {
    kinds.push_back(absl::AsciiStrToLower(kind->value(i)->name()));
  }
  std::sort(kinds.begin(), kinds.end());
  EXPECT_EQ(OptimizerNames(), kinds);
  EXPECT_EQ(OptimizerNames(), (std::vector<std::string>{"adam", "momentum", "none", "sgd"}));
}

TEST(OptimizerTest, NamesAreTheProtoKindsInAnyCase) {
  for (const char* name : {"SGD", "sgd", "Sgd", "MOMENTUM", "adam", "None"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(MakeOptimizer(name, Config(0.1)).ok());
  }
  proto::Optimizer adam = Config(0.1);
  adam.set_kind(proto::Optimizer::ADAM);
  EXPECT_EQ(OptimizerName(adam), "adam");
  EXPECT_TRUE(MakeOptimizer(adam).ok());
}

TEST(OptimizerTest, AnUnknownNameIsRefusedWithTheKnownOnes) {
  const auto rule = MakeOptimizer("rmsprop", Config(0.1));
  EXPECT_EQ(rule.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rule.status().message(),
            "unknown optimizer 'rmsprop' (known: adam, momentum, none, sgd)");
  // A kind the proto does not name (proto3 keeps unknown enum values).
  proto::Optimizer config;
  config.set_kind(static_cast<proto::Optimizer::Kind>(42));
  EXPECT_EQ(MakeOptimizer(config).status().message(),
            "unknown optimizer kind 42 (known: adam, momentum, none, sgd)");
}

TEST(OptimizerTest, NoneServesTheGradientItself) {
  auto rule = Make("none", Config(0.1), 3);
  ASSERT_NE(rule, nullptr);
  EXPECT_FALSE(rule->Updates());
  const std::vector<float> g = {1.5f, -2, 4};
  std::vector<float> values(3);
  rule->BeginStep();
  rule->Apply(0, std::span<const float>(g), nullptr, values.data());
  EXPECT_EQ(values, g);
  // Summed in place by the store: the gradient is the values.
  rule->Apply(0, std::span<const float>(values), nullptr, values.data());
  EXPECT_EQ(values, g);
}

TEST(OptimizerTest, SgdSubtractsTheScaledGradient) {
  // w -= 0.5 g, from 0; every value is exact in binary.
  const std::vector<std::vector<float>> g = {{1, -2, 4}, {2, 2, 0.5f}, {-1, 0, 8}};
  const std::vector<std::vector<float>> want = {{-0.5f, 1, -2}, {-1.5f, 0, -2.25f},
                                                {-1, 0, -6.25f}};
  for (std::size_t chunk : {1, 2, 3}) {
    auto rule = Make("sgd", Config(0.5), 3);
    ASSERT_NE(rule, nullptr);
    EXPECT_TRUE(rule->Updates());
    EXPECT_EQ(Steps(*rule, g, chunk), want) << "chunk " << chunk;
  }
}

TEST(OptimizerTest, MomentumCarriesEachElementsVelocity) {
  // v = 0.5 v + g; w -= 0.25 v, from v = w = 0:
  //   step 1: v = (4, -8)  w = (-1, 2)
  //   step 2: v = (4, -2)  w = (-2, 2.5)
  //   step 3: v = (2, 3)   w = (-2.5, 1.75)
  const std::vector<std::vector<double>> g = {{4, -8}, {2, 2}, {0, 4}};
  const std::vector<std::vector<double>> want = {{-1, 2}, {-2, 2.5}, {-2.5, 1.75}};
  for (std::size_t chunk : {1, 2}) {  // chunk 1: the second element's state is at begin 1
    auto rule = Make("momentum", Config(0.25, 0.5), 2);
    ASSERT_NE(rule, nullptr);
    EXPECT_EQ(Steps(*rule, g, chunk), want) << "chunk " << chunk;
  }
  // The same in float32 (the state stays in double).
  auto rule = Make("momentum", Config(0.25, 0.5), 2);
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(Steps<float>(*rule, {{4, -8}, {2, 2}, {0, 4}}, 1),
            (std::vector<std::vector<float>>{{-1, 2}, {-2, 2.5f}, {-2.5f, 1.75f}}));
}

// Adam's reference values, worked out step by step with the update of Kingma
// & Ba (m/(1-b1^t), v/(1-b2^t)) in double precision. Without the bias
// correction step 1 would be (-0.0316, 0.0316) with the defaults, not
// (-0.01, 0.01).
TEST(OptimizerTest, AdamCorrectsItsMomentsForBiasEachStep) {
  const std::vector<std::vector<double>> g = {{1, -2}, {0.5, 3}, {-1, 1}};
  struct Case {
    const char* what;
    double lr, b1, b2, eps;
    std::vector<std::vector<double>> want;
  };
  const Case cases[] = {
      {"defaults (0 means b1 0.9, b2 0.999, eps 1e-8)", 0.01, 0, 0, 0,
       {{-0.0099999999, 0.00999999995},
        {-0.0193217961701839, 0.00752298179837313},
        {-0.0204296268706128, 0.00396963786878127}}},
      {"b1 0.5, b2 0.75, eps 1e-3", 0.1, 0.5, 0.75, 1e-3,
       {{-0.0999000999000999, 0.0999500249875063},
        {-0.187975297733849, 0.0490519542875838},
        {-0.155169178996312, -0.00587987002017581}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    for (std::size_t chunk : {1, 2}) {
      proto::Optimizer config = Config(c.lr);
      config.set_beta1(c.b1);
      config.set_beta2(c.b2);
      config.set_epsilon(c.eps);
      auto rule = Make("adam", config, 2);
      ASSERT_NE(rule, nullptr);
      const auto got = Steps(*rule, g, chunk);
      for (std::size_t s = 0; s < got.size(); ++s) {
        for (std::size_t i = 0; i < 2; ++i) {
          EXPECT_NEAR(got[s][i], c.want[s][i], 1e-14)
              << "step " << s + 1 << ", element " << i << ", chunk " << chunk;
        }
      }
    }
  }
}

// The store's results must not move by a bit when its optimizers change
// shape: each rule against the expressions the store evaluated before they
// were rules (its switch on the kind), compared exactly.
template <typename T>
void ExpectTheFormerNumerics() {
  const std::vector<std::vector<T>> g = {{T(0.3), T(-1.7), T(2.25), T(1e-3), T(-4)},
                                         {T(1.1), T(0.2), T(-0.9), T(5), T(0.01)},
                                         {T(-0.6), T(3.3), T(0.7), T(-2), T(0.125)}};
  const std::size_t n = g[0].size();
  proto::Optimizer config = Config(0.0123, 0.87);
  for (const char* name : {"sgd", "momentum", "adam"}) {
    SCOPED_TRACE(name);
    auto rule = Make(name, config, static_cast<std::int64_t>(n));
    ASSERT_NE(rule, nullptr);
    const auto got = Steps(*rule, g, 2);
    const double lr = config.learning_rate();
    std::vector<double> v(n), m2(n);
    std::vector<T> prev(n, T{0}), w(n);
    for (std::size_t s = 0; s < g.size(); ++s) {
      const auto step = static_cast<double>(s + 1);
      for (std::size_t i = 0; i < n; ++i) {
        if (std::string_view(name) == "sgd") {
          w[i] = static_cast<T>(prev[i] - lr * g[s][i]);
        } else if (std::string_view(name) == "momentum") {
          v[i] = config.momentum() * v[i] + g[s][i];
          w[i] = static_cast<T>(prev[i] - lr * v[i]);
        } else {
          const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
          const double c1 = 1 - std::pow(b1, step), c2 = 1 - std::pow(b2, step);
          v[i] = b1 * v[i] + (1 - b1) * g[s][i];
          m2[i] = b2 * m2[i] + (1 - b2) * static_cast<double>(g[s][i]) * g[s][i];
          w[i] = static_cast<T>(prev[i] - lr * (v[i] / c1) / (std::sqrt(m2[i] / c2) + eps));
        }
      }
      EXPECT_EQ(got[s], w) << "step " << s + 1;
      prev = w;
    }
  }
}

TEST(OptimizerTest, NumericsAreBitForBitTheStoresFormerOnes) {
  ExpectTheFormerNumerics<float>();
  ExpectTheFormerNumerics<double>();
}

TEST(OptimizerTest, EachInstanceKeepsItsOwnState) {
  // Two tensors with momentum: stepping one leaves the other's velocity alone.
  auto a = Make("momentum", Config(1, 1), 1);
  auto b = Make("momentum", Config(1, 1), 1);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  Steps<double>(*a, {{5}, {5}}, 1);
  EXPECT_EQ(Steps<double>(*b, {{1}}, 1), (std::vector<std::vector<double>>{{-1}}));
}

}  // namespace
}  // namespace testbed
