#include "worker/sweep_runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allreduce/collective.h"
#include "allreduce/collectives.h"
#include "allreduce/executor.h"
#include "allreduce/expected_values.h"
#include "allreduce/rank_groups.h"
#include "allreduce/segment_plan.h"
#include "proto/fabric_spec.h"
#include "proto/spec.h"
#include "worker/interface_counters.h"

namespace testbed {
namespace {

using Clock = std::chrono::steady_clock;

// When each round of an iteration ended, from the iteration's start, with
// ExperimentSpec.record_rounds (RankResult.round_end_us); off, it records
// nothing and hands the executor no observer.
class RoundClock {
 public:
  explicit RoundClock(bool on) : on_(on) {}

  Executor::RoundObserver Observer() {
    if (!on_) return nullptr;
    return [this](std::size_t) { ends_.push_back(Micros(Clock::now())); };
  }
  void Start(Clock::time_point start) {
    start_ = start;
    ends_.clear();
  }
  // The iteration's ends into `result`: the schedule's rounds, or ps's push
  // (until `pushed`) and pull phases. The last is the iteration's time, so
  // a rank's spans add up to it.
  void Finish(Clock::time_point end, std::optional<Clock::time_point> pushed,
              proto::RankResult& result) {
    if (!on_) return;
    result.clear_round_end_us();
    if (pushed) ends_ = {Micros(std::clamp(*pushed, start_, end))};
    if (ends_.empty() || pushed) {
      ends_.push_back(Micros(end));
    } else {
      ends_.back() = Micros(end);  // the executor's return, a few microseconds on
    }
    for (double us : ends_) result.add_round_end_us(us);
  }

 private:
  double Micros(Clock::time_point t) const {
    return std::chrono::duration<double, std::micro>(t - start_).count();
  }
  bool on_;
  Clock::time_point start_;
  std::vector<double> ends_;
};

}  // namespace

absl::Status RunSweep(const proto::ExperimentSpec& spec, const SweepEnvironment& env,
                      const EmitRankResult& emit) {
  Transport& transport = *env.transport;
  const int rank = transport.rank();
  const int n = transport.world_size();
  const DataType type = DataTypeOf(spec.dtype());
  const ReduceOp op = ReduceOpOf(spec.op());
  const auto element = static_cast<std::int64_t>(ElementSize(type));
  const std::int64_t max_bytes = *std::max_element(spec.sizes().begin(), spec.sizes().end());
  // Where the vector lives; memory host code can't touch (a GPU's) goes
  // through host memory: to the parameter server chunk by chunk (PsClient
  // stages it), to the check through `staging`.
  const MemoryType memory = MemoryTypeOf(spec.memory());
  if (absl::Status st = UseMemory(memory, rank); !st.ok()) return st;
  const MemoryOps& ops = MemoryOpsFor(memory);
  const bool staged = !HostAccessible(memory);
  // The all-reduces' data goes through host memory (ps's always does).
  const bool staged_path = staged && !(env.device_direct && memory == MemoryType::kCuda);

  // Allocated zeroed: every page is touched here, not in a timed loop.
  const Allocation buffer = ops.Allocate(max_bytes);
  std::vector<std::byte> pristine(max_bytes), staging(staged ? max_bytes : 0);
  Executor executor(transport);
  // Under the spec's split this rank runs each collective in its group, as a
  // group of that size would: inputs, schedule and check by its index there,
  // the inputs shifted by its group's index (expected_values.h's phase).
  absl::StatusOr<RankGroups> groups = GroupsOf(spec, n);
  if (!groups.ok()) return groups.status();
  const auto group_size = static_cast<int>(groups->GroupOf(rank).size());
  const int group_index = groups->index_in_group[static_cast<std::size_t>(rank)];
  const std::int64_t phase = groups->group_of_rank[static_cast<std::size_t>(rank)];

  // The barrier is a one-element all-reduce; its buffer is its own.
  const Schedule barrier = BuildAllReduceButterfly(rank, n, 1);
  std::int32_t barrier_value = 0;
  const auto barrier_span = std::as_writable_bytes(std::span(&barrier_value, 1));
  const auto sync = [&] {
    return executor.Run(barrier, barrier_span, DataType::kInt32, ReduceOp::kSum);
  };

  for (const std::string& name : spec.algorithms()) {
    const Collective* collective = FindCollective(name);
    if (collective == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown algorithm '", name, "'"));
    }
    const bool ps = collective->runs_on_parameter_server();
    if (ps && env.parameter_server == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(name, " requested but no parameter server shards known"));
    }
    const Semantics semantics = collective->semantics;
    for (const std::int64_t bytes : spec.sizes()) {
      const std::int64_t count = bytes / element;
      const MutableBuffer data = buffer.buffer().subspan(0, bytes);
      const std::span<std::byte> host_view =  // what the check reads
          staged ? std::span(staging.data(), bytes) : std::span(data.data, bytes);
      FillInput(semantics, group_size, group_index, count, type, 0, pristine.data(), phase);

      // One iteration of this (algorithm, size), and the traffic it moved.
      std::function<absl::Status()> run_once;
      std::function<void()> reset_traffic;
      Schedule schedule;
      std::string tensor;
      std::uint64_t step = 0;
      std::size_t segment = 0;  // pipelining, scheduled collectives only
      RoundClock rounds(spec.record_rounds());
      if (ps) {
        proto::TensorSpec declared;
        tensor = absl::StrCat(env.tensor_prefix, "/", bytes);
        declared.set_name(tensor);
        declared.set_count(count);
        declared.set_dtype(spec.dtype());
        declared.set_workers(n);
        declared.mutable_optimizer()->set_kind(proto::Optimizer::NONE);  // the sum: exact
        if (absl::Status st = env.parameter_server->Declare(declared); !st.ok()) return st;
        // gRPC is host-only: device memory goes down and back up, timed,
        // per chunk and overlapped with the pushes and pulls (PsClient).
        run_once = [&] { return env.parameter_server->PushPull(tensor, rank, ++step, data); };
        reset_traffic = [&] { env.parameter_server->ResetTraffic(); };
      } else {
        schedule = BuildInGroup(*collective, *groups, rank, count, /*root=*/0,
                                PlacementOf(spec.fabric(), n));
        segment = SegmentBytesFor(spec, bytes, staged_path);
        executor.Prepare(schedule, type, memory, segment);
        run_once = [&] {
          return executor.Run(schedule, data, type, op,
                              {.observer = rounds.Observer(), .segment_bytes = segment});
        };
        reset_traffic = [&] { transport.ResetTraffic(); };
      }

      proto::RankResult result;
      result.set_rank(rank);
      result.set_algorithm(name);
      result.set_bytes(bytes);
      result.set_segment_bytes(segment);
      result.set_memory(std::string(Name(memory)));
      // ps is gRPC, host-only: device memory is staged above, whatever the path.
      result.set_gpu_path(!staged ? "none" : ps || staged_path ? "staged" : "direct");
      // ps over its own interface names it, so fits and plots tell an
      // emulated cluster's links from loopback, as the UCX label does.
      result.set_transport(ps ? (env.net_device.empty() ? std::string("grpc")
                                                        : "grpc:tcp/" + env.net_device)
                              : env.transport_label);
      if (!ps) result.set_ucx_environment(env.ucx_environment);
      const std::uint32_t total = spec.warmup() + spec.iterations();
      const std::chrono::microseconds late(RankDelayMicros(spec.fabric(), rank));
      std::optional<InterfaceBytes> wire_before, wire_after;
      // Payload of the last iteration, read before any barrier adds its own.
      std::uint64_t sent = 0, received = 0, staged_bytes = 0;
      std::vector<std::uint64_t> per_shard;
      const auto read_payload = [&] {
        sent = received = 0;
        staged_bytes = ps ? env.parameter_server->staged_bytes() : transport.StagedBytes();
        per_shard.clear();
        if (ps) {
          for (const ShardTraffic& t : env.parameter_server->traffic()) {
            sent += t.bytes_pushed;
            received += t.bytes_pulled;
            per_shard.push_back(t.bytes_pushed + t.bytes_pulled);
          }
        } else {
          for (const PeerTraffic& t : transport.Traffic()) {
            sent += t.bytes_sent;
            received += t.bytes_received;
          }
        }
      };
      for (std::uint32_t i = 0; i < total; ++i) {
        // In-place collectives overwrite their input: restore it, untimed.
        // Ranks end an iteration at different times, and on shared cores an
        // early rank's restore would run inside a late rank's timed window:
        // a barrier first keeps the harness's copy out of every measurement.
        if (bytes > 0) {
          if (i > 0) {
            if (absl::Status st = sync(); !st.ok()) return st;
          }
          ops.Upload(data, std::span(pristine.data(), bytes));
        }
        if (absl::Status st = sync(); !st.ok()) return st;
        reset_traffic();
        wire_before = ReadInterfaceBytes(env.net_device);
        // A compute straggler (the fabric's slow_ranks) begins late, outside
        // its own timer: the others' times include waiting for it.
        if (late.count() > 0) std::this_thread::sleep_for(late);
        const auto start = Clock::now();
        rounds.Start(start);
        if (absl::Status st = run_once(); !st.ok()) {
          return absl::Status(st.code(), absl::StrCat(name, " at ", bytes, " bytes: ",
                                                      std::string(st.message())));
        }
        const auto end = Clock::now();
        rounds.Finish(end,
                      ps ? std::optional(env.parameter_server->last_push_done()) : std::nullopt,
                      result);
        read_payload();
        if (wire_before) {
          // A send completes once the kernel has the bytes, not once they left:
          // after a barrier every rank has received everything sent to it.
          if (absl::Status st = sync(); !st.ok()) return st;
          wire_after = ReadInterfaceBytes(env.net_device);
        }
        if (i >= spec.warmup()) {
          result.add_iteration_us(std::chrono::duration<double, std::micro>(end - start).count());
        }
      }
      for (std::uint64_t bytes : per_shard) result.add_shard_payload_bytes(bytes);
      result.set_payload_bytes_sent(sent);
      result.set_payload_bytes_received(received);
      result.set_staged_bytes(staged_bytes);
      if (wire_before && wire_after) {  // the last iteration's, like the payload
        result.set_net_device(env.net_device);
        result.set_wire_bytes_sent(wire_after->sent - wire_before->sent);
        result.set_wire_bytes_received(wire_after->received - wire_before->received);
      }
      if (staged && !spec.skip_check()) ops.Download(host_view, data);
      result.set_wrong(spec.skip_check()
                           ? -1
                           : CheckRank(semantics, group_size, group_index, host_view.data(),
                                       count, type, op, 0, phase)
                                 .count);
      if (ps) {
        // Once every worker has pulled its last step, rank 0 frees the tensor.
        if (absl::Status st = sync(); !st.ok()) return st;
        if (rank == 0) {
          if (absl::Status st = env.parameter_server->Forget(tensor); !st.ok()) return st;
        }
      }
      if (absl::Status st = emit(result); !st.ok()) return st;
    }
  }
  // A rank whose last receive has completed may still owe its sender the
  // rendezvous acknowledgement that completes the send: UCX sends it from a
  // later progress call. Pipelined over shared memory, with dozens of
  // segments in flight, it waited in a queue while the rank, done, progressed
  // no more, and the sender timed out. A last barrier keeps every rank
  // progressing until every rank is done.
  return sync();
}

}  // namespace testbed
