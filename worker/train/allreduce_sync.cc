#include "worker/train/allreduce_sync.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace testbed {

absl::StatusOr<std::unique_ptr<AllReduceSync>> AllReduceSync::Create(
    const Collective& collective, Transport& transport, std::int64_t count,
    std::size_t bucket_bytes, const proto::Optimizer& optimizer) {
  if (!collective.has_schedule() || !collective.is_all_reduce()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", std::string(collective.name), "' is not a scheduled all-reduce (choose from ",
        CollectiveNames(Kinds::kScheduledAllReduce), ")"));
  }
  absl::StatusOr<std::unique_ptr<Optimizer>> rule = MakeOptimizer(optimizer);
  if (!rule.ok()) return rule.status();
  (*rule)->Prepare(count);
  std::unique_ptr<AllReduceSync> sync(new AllReduceSync(transport, *std::move(rule)));
  const std::int64_t per_bucket =
      bucket_bytes == 0 ? count
                        : std::max<std::int64_t>(1, static_cast<std::int64_t>(bucket_bytes / 4));
  for (std::int64_t offset = 0; offset < count; offset += per_bucket) {
    const std::int64_t elements = std::min(per_bucket, count - offset);
    Bucket bucket{.offset = offset,
                  .schedule = collective.build(transport.rank(), transport.world_size(), elements,
                                               /*root=*/0)};
    sync->executor_.Prepare(bucket.schedule, DataType::kFloat32);
    sync->buckets_.push_back(std::move(bucket));
  }
  return sync;
}

absl::Status AllReduceSync::Step(std::uint64_t step, std::span<float> gradient,
                                 std::span<float> parameters) {
  std::span<std::byte> bytes = std::as_writable_bytes(gradient);
  for (const Bucket& bucket : buckets_) {
    MutableBuffer slice(bytes.subspan(bucket.offset * sizeof(float),
                                      bucket.schedule.count * sizeof(float)));
    if (absl::Status s = executor_.Run(bucket.schedule, slice, DataType::kFloat32, ReduceOp::kSum);
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("all-reduce of step ", step, ": ", s.message()));
    }
  }
  const float inverse_world = 1.0f / static_cast<float>(transport_.world_size());
  for (float& g : gradient) g *= inverse_world;
  optimizer_->BeginStep();
  optimizer_->Apply(0, gradient, parameters.data(), parameters.data());
  return absl::OkStatus();
}

std::uint64_t AllReduceSync::PayloadBytes() const {
  std::uint64_t bytes = 0;
  for (const PeerTraffic& peer : transport_.Traffic()) bytes += peer.bytes_sent + peer.bytes_received;
  return bytes;
}

}  // namespace testbed
