#include "worker/train/mlp.h"

#include <cmath>
#include <random>
#include <stdexcept>

namespace testbed {

Mlp::Mlp(std::vector<int> layer_sizes) : layer_sizes_(std::move(layer_sizes)) {
  if (layer_sizes_.size() < 2) throw std::invalid_argument("an MLP needs inputs and outputs");
  for (int l = 0; l < layer_count(); ++l) {
    const std::int64_t in = layer_sizes_[l], out = layer_sizes_[l + 1];
    if (in <= 0 || out <= 0) throw std::invalid_argument("MLP layer sizes must be positive");
    ranges_.push_back({parameter_count_, out * in + out});
    parameter_count_ += out * in + out;
  }
}

Mlp::ConstMatrixMap Mlp::Weights(std::span<const float> parameters, int layer) const {
  return ConstMatrixMap(parameters.data() + ranges_[layer].offset, layer_sizes_[layer + 1],
                        layer_sizes_[layer]);
}

Mlp::ConstVectorMap Mlp::Biases(std::span<const float> parameters, int layer) const {
  const std::int64_t weights = std::int64_t{layer_sizes_[layer + 1]} * layer_sizes_[layer];
  return ConstVectorMap(parameters.data() + ranges_[layer].offset + weights,
                        layer_sizes_[layer + 1]);
}

std::vector<float> Mlp::InitialParameters(std::uint64_t seed) const {
  std::vector<float> parameters(parameter_count_, 0.0f);
  std::mt19937_64 random(seed);
  for (int l = 0; l < layer_count(); ++l) {
    // He initialisation keeps ReLU activations' variance from layer to layer.
    const float limit = std::sqrt(6.0f / static_cast<float>(layer_sizes_[l]));
    std::uniform_real_distribution<float> uniform(-limit, limit);
    const std::int64_t weights = std::int64_t{layer_sizes_[l + 1]} * layer_sizes_[l];
    for (std::int64_t i = 0; i < weights; ++i) parameters[ranges_[l].offset + i] = uniform(random);
  }
  return parameters;
}

const Eigen::MatrixXf& Mlp::Forward(std::span<const float> parameters,
                                    const Eigen::MatrixXf& inputs) {
  activations_.resize(layer_sizes_.size());
  activations_[0] = inputs;
  for (int l = 0; l < layer_count(); ++l) {
    Eigen::MatrixXf& next = activations_[l + 1];
    next.noalias() = Weights(parameters, l) * activations_[l];
    next.colwise() += Biases(parameters, l);
    if (l + 1 < layer_count()) next = next.cwiseMax(0.0f);
  }
  return activations_.back();
}

float Mlp::LossAndGradient(std::span<const float> parameters, const Eigen::MatrixXf& inputs,
                           std::span<const int> labels, std::span<float> gradient,
                           const LayerReady& ready) {
  const Eigen::MatrixXf& logits = Forward(parameters, inputs);
  const Eigen::Index batch = logits.cols();
  // Softmax, shifted by each column's maximum so exp() cannot overflow.
  delta_ = (logits.rowwise() - logits.colwise().maxCoeff()).array().exp().matrix();
  const Eigen::RowVectorXf sums = delta_.colwise().sum();
  double loss = 0;
  for (Eigen::Index c = 0; c < batch; ++c) {
    delta_.col(c) /= sums(c);
    loss -= std::log(std::max(delta_(labels[c], c), 1e-30f));
    delta_(labels[c], c) -= 1.0f;  // softmax - one-hot: d loss / d logits
  }
  delta_ /= static_cast<float>(batch);  // the loss is the batch's mean

  for (int l = layer_count() - 1; l >= 0; --l) {
    const Range range = ranges_[l];
    const Eigen::Index out = layer_sizes_[l + 1], in = layer_sizes_[l];
    Eigen::Map<Eigen::MatrixXf> weight_gradient(gradient.data() + range.offset, out, in);
    Eigen::Map<Eigen::VectorXf> bias_gradient(gradient.data() + range.offset + out * in, out);
    weight_gradient.noalias() = delta_ * activations_[l].transpose();
    bias_gradient = delta_.rowwise().sum();
    // Layer l's gradient is final: its synchronisation may start while the
    // error is carried down to the layer below (DDP's hook fires here too).
    if (ready) ready(l);
    if (l > 0) {
      // Through the weights, then through the ReLU (whose output was cached).
      Eigen::MatrixXf below = Weights(parameters, l).transpose() * delta_;
      delta_ = (activations_[l].array() > 0.0f).select(below, 0.0f);
    }
  }
  return static_cast<float>(loss / static_cast<double>(batch));
}

double Mlp::Accuracy(std::span<const float> parameters, const Dataset& data, int max_samples) {
  const int samples = max_samples > 0 ? std::min(max_samples, data.samples()) : data.samples();
  constexpr int kChunk = 2000;  // bounds the activations' memory
  int correct = 0;
  for (int begin = 0; begin < samples; begin += kChunk) {
    const int count = std::min(kChunk, samples - begin);
    const Eigen::MatrixXf& logits = Forward(parameters, data.inputs.middleCols(begin, count));
    for (int c = 0; c < count; ++c) {
      Eigen::Index best = 0;
      logits.col(c).maxCoeff(&best);
      if (best == data.labels[begin + c]) ++correct;
    }
  }
  return samples == 0 ? 0.0 : static_cast<double>(correct) / samples;
}

}  // namespace testbed
