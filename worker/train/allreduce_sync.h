// GradientSync through an all-reduce of the registry, run by the Executor
// over a Transport (UCX between processes or threads, in-process in tests).
// The gradient is cut into buckets of about `bucket_bytes` (DDP's gradient
// buckets; 0: one bucket), each all-reduced in order with its own schedule,
// then divided by N; the optimizer then updates the parameters locally.
//
// Thread-safety: one per worker; borrows the transport, which must outlive it.
#pragma once

#include <memory>
#include <vector>

#include "allreduce/collective.h"
#include "allreduce/executor.h"
#include "allreduce/schedule.h"
#include "allreduce/transport/transport.h"
#include "server/optimizer.h"
#include "worker/train/gradient_sync.h"

namespace testbed {

class AllReduceSync final : public GradientSync {
 public:
  // `collective` must be a scheduled all-reduce; `count` is the number of
  // parameters.
  static absl::StatusOr<std::unique_ptr<AllReduceSync>> Create(const Collective& collective,
                                                                Transport& transport,
                                                                std::int64_t count,
                                                                std::size_t bucket_bytes,
                                                                const proto::Optimizer& optimizer);

  absl::Status Step(std::uint64_t step, std::span<float> gradient,
                    std::span<float> parameters) override;
  std::uint64_t PayloadBytes() const override;

 private:
  struct Bucket {
    std::int64_t offset = 0;  // in floats
    Schedule schedule;        // of the bucket's elements
  };
  AllReduceSync(Transport& transport, std::unique_ptr<Optimizer> optimizer)
      : transport_(transport), executor_(transport), optimizer_(std::move(optimizer)) {}

  Transport& transport_;
  Executor executor_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<Bucket> buckets_;
};

}  // namespace testbed
