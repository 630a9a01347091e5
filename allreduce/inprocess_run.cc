#include "allreduce/inprocess_run.h"

#include <thread>

#include "allreduce/executor.h"
#include "allreduce/transport/inprocess_transport.h"

namespace testbed {

InProcessRun RunInProcess(const Collective& collective, std::vector<Bytes> inputs,
                          const InProcessRunOptions& options) {
  const int world_size = static_cast<int>(inputs.size());
  const std::int64_t count =
      world_size == 0 ? 0 : static_cast<std::int64_t>(inputs[0].size() / ElementSize(options.type));
  InProcessRun run;
  run.buffers = std::move(inputs);
  run.traffic.resize(world_size);
  run.status.resize(world_size);

  std::vector<Schedule> schedules;
  for (int rank = 0; rank < world_size; ++rank) {
    schedules.push_back(options.groups.members.empty()
                            ? collective.Build(rank, world_size, count, options.root,
                                               options.placement)
                            : BuildInGroup(collective, options.groups, rank, count, options.root,
                                           options.placement));
  }
  if (options.keep_snapshots && world_size > 0) {
    run.snapshots.assign(schedules[0].rounds.size(), std::vector<Bytes>(world_size));
  }

  InProcessFabric fabric(world_size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      std::unique_ptr<Transport> transport = fabric.Connect(rank);
      Executor executor(*transport);
      Bytes& host = run.buffers[rank];
      const MemoryOps& memory = MemoryOpsFor(options.memory);
      const Allocation allocation = memory.Allocate(host.size());
      const MutableBuffer buffer = allocation.buffer();
      memory.Upload(buffer, host);
      Executor::RunOptions run_options{.segment_bytes = options.segment_bytes};
      if (options.keep_snapshots) {
        run_options.observer = [&](std::size_t round) {
          run.snapshots[round][rank].resize(host.size());
          memory.Download(run.snapshots[round][rank], buffer);
        };
      }
      run.status[rank] = executor.Run(schedules[rank], buffer, options.type, options.op, run_options);
      memory.Download(host, buffer);
      // A failed rank would leave its peers waiting until their deadline.
      if (!run.status[rank].ok()) fabric.MarkLost(rank);
      run.traffic[rank] = transport->Traffic();
    });
  }
  for (std::thread& t : threads) t.join();
  return run;
}

}  // namespace testbed
