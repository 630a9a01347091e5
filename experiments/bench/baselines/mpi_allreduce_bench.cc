// Baseline: OpenMPI's MPI_Allreduce, float32 sum, over a sweep of sizes.
//
//   mpirun -np 4 mpi_allreduce_bench [--min-bytes 8] [--max-bytes 16MiB]
//       [--factor 2] [--iters 20] [--warmup 5] [--transport tcp]
//
// Both buffers are allocated for the largest size and touched before any
// timing, then reused for every size (a first-touch page fault costs ~13 us per
// 4 KiB page on the machines this was written on). Each timed iteration starts
// after an MPI_Barrier; its time is the slowest rank's (MPI_Reduce MAX over
// the per-iteration times, done after the timed loop). Rank 0 prints one JSON
// line per size (fields in bench_common.h). The receive buffer is poisoned
// before every iteration (outside the timing) and checked after it: rank r
// contributes r+1 per element, so every element must be N(N+1)/2; `wrong` is
// the number of wrong elements summed over ranks and iterations.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "bench_common.h"

namespace {

void Check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    std::fprintf(stderr, "%s failed: %d\n", what, rc);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, workers = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &workers);

  baselines::SweepOptions options;
  std::vector<std::string> rest =
      baselines::ParseSweepOptions(argc, argv, &options);
  if (!rest.empty()) {
    if (rank == 0) std::fprintf(stderr, "unknown argument: %s\n", rest[0].c_str());
    MPI_Finalize();
    return 2;
  }
  const std::vector<std::int64_t> sizes = baselines::SweepSizes(options);
  const std::int64_t max_count = sizes.back() / 4;

  // Allocate and touch everything up front.
  const float mine = baselines::Contribution(rank);
  const float expected = baselines::ExpectedSum(workers);
  const float poison = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> send(static_cast<std::size_t>(max_count), mine);
  std::vector<float> recv(static_cast<std::size_t>(max_count), poison);
  std::vector<double> local_us(static_cast<std::size_t>(options.iters));
  std::vector<double> slowest_us(static_cast<std::size_t>(options.iters));

  for (std::int64_t bytes : sizes) {
    const int count = static_cast<int>(bytes / 4);
    std::int64_t wrong = 0;
    double faults = 0;
    for (int it = -options.warmup; it < options.iters; ++it) {
      std::fill(recv.begin(), recv.begin() + count, poison);
      const double f0 = baselines::MinorFaults();
      Check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
      const auto t0 = std::chrono::steady_clock::now();
      Check(MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD),
            "MPI_Allreduce");
      const auto t1 = std::chrono::steady_clock::now();
      const double f1 = baselines::MinorFaults();
      wrong += baselines::CountWrong(recv.data(), count, expected);
      if (it >= 0) {
        faults += f1 - f0;
        local_us[static_cast<std::size_t>(it)] =
            std::chrono::duration<double, std::micro>(t1 - t0).count();
      }
    }
    Check(MPI_Reduce(local_us.data(), slowest_us.data(), options.iters,
                     MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD),
          "MPI_Reduce");
    long long wrong_local = wrong, wrong_total = 0;
    Check(MPI_Reduce(&wrong_local, &wrong_total, 1, MPI_LONG_LONG, MPI_SUM, 0,
                     MPI_COMM_WORLD),
          "MPI_Reduce");
    double faults_local = faults / options.iters, faults_max = 0;
    Check(MPI_Reduce(&faults_local, &faults_max, 1, MPI_DOUBLE, MPI_MAX, 0,
                     MPI_COMM_WORLD),
          "MPI_Reduce");
    if (rank == 0) {
      baselines::PrintResult("openmpi", "MPI_Allreduce", options, workers,
                             bytes, slowest_us, wrong_total, faults_max);
    }
  }
  MPI_Finalize();
  return 0;
}
