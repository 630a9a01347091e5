// A multi-layer perceptron: inputs -> hidden layers (ReLU) -> classes, with a
// softmax cross-entropy loss averaged over the batch. Matrix work is Eigen's.
//
// The parameters are one flat float vector, owned by the caller, layer after
// layer from the input side: each layer's weights (outputs x inputs,
// column-major) then its biases. The gradient has the same layout, so one
// buffer goes to an all-reduce or a parameter server as it is, and a
// layer's gradient is one contiguous range of it.
//
// Backpropagation runs layer by layer from the output side and reports each
// layer as soon as its gradient range is final (LayerReady), so a caller can
// start synchronising it while the layers below are still being computed.
//
// Thread-safety: an Mlp keeps its activations between the forward and the
// backward pass: one thread per Mlp. Give each worker its own.
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "worker/train/dataset.h"

namespace testbed {

class Mlp {
 public:
  // {inputs, hidden..., classes}: at least inputs and classes, all positive.
  explicit Mlp(std::vector<int> layer_sizes);

  struct Range {
    std::int64_t offset = 0;  // in floats of the flat vector
    std::int64_t count = 0;
  };

  int layer_count() const { return static_cast<int>(layer_sizes_.size()) - 1; }
  const std::vector<int>& layer_sizes() const { return layer_sizes_; }
  std::int64_t parameter_count() const { return parameter_count_; }
  // Where layer `layer` (0 = the one that reads the inputs) lives in the flat vector.
  Range LayerRange(int layer) const { return ranges_[layer]; }

  // He-uniform weights and zero biases, a function of `seed` alone.
  std::vector<float> InitialParameters(std::uint64_t seed) const;

  // Called with a layer's index once its range of the gradient is final;
  // layers come from the last to the first.
  using LayerReady = std::function<void(int layer)>;

  // The mean loss over the batch (one column of `inputs` per sample), and its
  // gradient with respect to `parameters` written into `gradient`.
  float LossAndGradient(std::span<const float> parameters, const Eigen::MatrixXf& inputs,
                        std::span<const int> labels, std::span<float> gradient,
                        const LayerReady& ready = nullptr);

  // The fraction of the first `max_samples` samples (all if 0) whose most
  // likely class is their label.
  double Accuracy(std::span<const float> parameters, const Dataset& data, int max_samples = 0);

 private:
  using ConstMatrixMap = Eigen::Map<const Eigen::MatrixXf>;
  using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;
  ConstMatrixMap Weights(std::span<const float> parameters, int layer) const;
  ConstVectorMap Biases(std::span<const float> parameters, int layer) const;
  // Fills activations_ (activations_[0] is a copy of the inputs) and returns
  // the last layer's logits.
  const Eigen::MatrixXf& Forward(std::span<const float> parameters, const Eigen::MatrixXf& inputs);

  std::vector<int> layer_sizes_;
  std::vector<Range> ranges_;  // by layer
  std::int64_t parameter_count_ = 0;
  // Forward pass: activations_[l] is layer l's input (ReLU already applied),
  // activations_.back() the logits.
  std::vector<Eigen::MatrixXf> activations_;
  Eigen::MatrixXf delta_;  // d loss / d pre-activation of the layer being differentiated
};

}  // namespace testbed
