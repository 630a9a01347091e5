// GradientSync through the synchronous parameter server (PsClient): every
// worker pushes its gradient of a step, the shards average the N gradients
// and apply the optimizer to their slices, and every worker pulls the result.
//
// The shards' parameters start at zero (server/parameter_store.h), so they
// hold the displacement from the initial parameters, which every worker
// knows (the same seed): parameters = initial + served. SGD, momentum and
// Adam depend only on the gradients, never on the parameters themselves, so
// the displacement follows exactly the rule a server holding the parameters
// would apply.
//
// Compression: the shard takes dense float32 pushes only (parameter_store.h),
// so PsSync pushes what it can take - the compressed gradient, decoded: fp16
// rounds each element to the nearest half, top-k zeroes all but the k largest
// (error feedback keeps the rest for the next step). The updates are those
// of the compressed scheme; the bytes are not smaller, and the rows say so.
//
// Thread-safety: one per worker; borrows the client, which must outlive it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "worker/ps_client.h"
#include "worker/train/compression.h"
#include "worker/train/gradient_sync.h"

namespace testbed {

class PsSync final : public GradientSync {
 public:
  // Declares the tensor `tensor` (every worker declares the same) of
  // initial.size() float32 elements for `workers` workers.
  static absl::StatusOr<std::unique_ptr<PsSync>> Create(PsClient& client, std::string tensor,
                                                        std::uint32_t worker, int workers,
                                                        std::span<const float> initial,
                                                        const proto::Optimizer& optimizer,
                                                        CompressionConfig compression = {});

  absl::Status Step(std::uint64_t step, std::span<float> gradient,
                    std::span<float> parameters) override;
  std::uint64_t PayloadBytes() const override;

 private:
  PsSync(PsClient& client, std::string tensor, std::uint32_t worker,
         std::span<const float> initial, CompressionConfig compression)
      : client_(client),
        tensor_(std::move(tensor)),
        worker_(worker),
        initial_(initial.begin(), initial.end()),
        compression_(compression) {}

  // `gradient` as the compressed scheme delivers it, in place.
  void Compress(std::span<float> gradient);

  PsClient& client_;
  const std::string tensor_;
  const std::uint32_t worker_;
  const std::vector<float> initial_;  // what the served displacement is added to
  const CompressionConfig compression_;
  std::unique_ptr<ErrorFeedbackTopK> topk_;  // top-k only, made at the first step
  std::vector<std::uint32_t> indices_;       // top-k's choice of one step
  std::vector<float> values_;
};

}  // namespace testbed
