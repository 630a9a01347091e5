// The MLP's backpropagation (worker/train/mlp.cc) against finite differences
// of its loss, for every parameter of small networks; and the layer-by-layer
// promise: each layer is reported once, from the output side, and its range
// of the gradient is final when it is reported.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "worker/train/mlp.h"

namespace testbed {
namespace {

struct Batch {
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
};

Batch RandomBatch(int features, int classes, int samples, std::uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> value(0.0f, 1.0f);
  std::uniform_int_distribution<int> label(0, classes - 1);
  Batch batch{Eigen::MatrixXf(features, samples), std::vector<int>(samples)};
  for (int s = 0; s < samples; ++s) {
    for (int f = 0; f < features; ++f) batch.inputs(f, s) = value(random);
    batch.labels[s] = label(random);
  }
  return batch;
}

class MlpGradientTest : public ::testing::TestWithParam<std::vector<int>> {};

// Central differences in float with a step h of 1e-3: the truncation error
// is O(h^2) and the rounding error about 1e-7 |loss| / h (1e-4), both under
// the tolerance of 1e-3 + 1e-2 |g| (a wrong transpose or a missing 1/B is
// off by far more). A larger h (1e-2) moves some hidden units across
// ReLU's kink, where no difference quotient matches the derivative.
TEST_P(MlpGradientTest, BackpropagationMatchesFiniteDifferences) {
  const std::vector<int> sizes = GetParam();
  Mlp model(sizes);
  std::vector<float> parameters = model.InitialParameters(7);
  // Biases away from zero, so that they are tested too.
  for (int l = 0; l < model.layer_count(); ++l) {
    const Mlp::Range range = model.LayerRange(l);
    const int weights = sizes[l] * sizes[l + 1];
    for (std::int64_t i = weights; i < range.count; ++i) parameters[range.offset + i] = 0.1f * (i % 3);
  }
  const Batch batch = RandomBatch(sizes.front(), sizes.back(), 5, 11);
  std::vector<float> gradient(model.parameter_count());
  model.LossAndGradient(parameters, batch.inputs, batch.labels, gradient);

  std::vector<float> scratch(model.parameter_count());
  constexpr float kStep = 1e-3f;
  for (std::int64_t i = 0; i < model.parameter_count(); ++i) {
    std::vector<float> shifted = parameters;
    shifted[i] = parameters[i] + kStep;
    const double up = model.LossAndGradient(shifted, batch.inputs, batch.labels, scratch);
    shifted[i] = parameters[i] - kStep;
    const double down = model.LossAndGradient(shifted, batch.inputs, batch.labels, scratch);
    const double numeric = (up - down) / (2 * kStep);
    EXPECT_NEAR(gradient[i], numeric, 1e-3 + 1e-2 * std::abs(numeric)) << "parameter " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MlpGradientTest,
                         ::testing::Values(std::vector<int>{4, 3},          // softmax regression
                                           std::vector<int>{6, 5, 3},       // one hidden layer
                                           std::vector<int>{5, 7, 4, 3}));  // two

TEST(MlpTest, ReportsEachLayerFromTheOutputSideOnceItsGradientIsFinal) {
  Mlp model({6, 5, 4, 3});
  const std::vector<float> parameters = model.InitialParameters(3);
  const Batch batch = RandomBatch(6, 3, 4, 5);
  std::vector<float> gradient(model.parameter_count());
  std::vector<int> order;
  std::vector<std::vector<float>> when_ready(model.layer_count());
  model.LossAndGradient(parameters, batch.inputs, batch.labels, gradient, [&](int layer) {
    order.push_back(layer);
    const Mlp::Range range = model.LayerRange(layer);
    when_ready[layer].assign(gradient.begin() + range.offset,
                             gradient.begin() + range.offset + range.count);
  });
  EXPECT_EQ(order, (std::vector<int>{2, 1, 0}));
  for (int layer = 0; layer < model.layer_count(); ++layer) {
    const Mlp::Range range = model.LayerRange(layer);
    EXPECT_EQ(when_ready[layer], std::vector<float>(gradient.begin() + range.offset,
                                                    gradient.begin() + range.offset + range.count))
        << "layer " << layer;
  }
}

TEST(MlpTest, InitialParametersAreAFunctionOfTheSeed) {
  Mlp model({8, 6, 3});
  EXPECT_EQ(model.parameter_count(), 8 * 6 + 6 + 6 * 3 + 3);
  EXPECT_EQ(model.InitialParameters(1), model.InitialParameters(1));
  EXPECT_NE(model.InitialParameters(1), model.InitialParameters(2));
}

}  // namespace
}  // namespace testbed
