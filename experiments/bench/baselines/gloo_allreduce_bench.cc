// Baseline: Gloo's all-reduces (Debian's libgloo-dev, 2022-05 snapshot),
// float32 sum, over a sweep of sizes, TCP transport on loopback.
//
//   gloo_allreduce_bench --rank R --workers N --rendezvous DIR
//       [--prefix P] [--host 127.0.0.1]
//       [--algorithms AllreduceRingChunked,AllreduceRing,AllreduceHalvingDoubling]
//       [--min-bytes 8] [--max-bytes 16MiB] [--factor 2] [--iters 20]
//       [--warmup 5] [--transport tcp]
//
// Start N processes (ranks 0..N-1) with the same DIR (an existing directory;
// gloo::rendezvous::FileStore writes one file per key there) and prefix; they
// meet there and connect a full mesh over TCP. Algorithms:
//   AllreduceRingChunked  bandwidth-optimal ring: 2N chunks, reduce-scatter
//                         then all-gather around the ring (the one to compare).
//   AllreduceRing         passes the whole buffer around the ring N-1 times
//                         (N-1 times the traffic; shown for completeness).
//   AllreduceHalvingDoubling  recursive halving reduce-scatter then doubling
//                         all-gather (Rabenseifner's), log2 N rounds each way.
// Timing, verification and output as in mpi_allreduce_bench.cc: the buffer
// (all-reduced in place) is refilled with r+1 and a barrier is run before each
// timed iteration; the per-iteration times are reduced with MAX after the
// timed loop; rank 0 prints one JSON line per size and algorithm.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier_all_to_all.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"

namespace {

struct GlooOptions {
  int rank = -1;
  int workers = 0;
  std::string rendezvous;
  std::string prefix = "gloo-bench";
  std::string host = "127.0.0.1";
  std::vector<std::string> algorithms = {"AllreduceRingChunked", "AllreduceRing",
                                         "AllreduceHalvingDoubling"};
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "%s\nusage: gloo_allreduce_bench --rank R --workers N "
               "--rendezvous DIR [--prefix P] [--host 127.0.0.1] "
               "[--algorithms AllreduceRingChunked,AllreduceRing,"
               "AllreduceHalvingDoubling] "
               "[--min-bytes B] [--max-bytes B] [--factor F] [--iters I] "
               "[--warmup W] [--transport LABEL]\n",
               why.c_str());
  std::exit(2);
}

GlooOptions ParseGlooOptions(const std::vector<std::string>& args) {
  GlooOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) Usage(a + " needs a value");
      return args[++i];
    };
    if (a == "--rank") {
      o.rank = std::stoi(value());
    } else if (a == "--workers") {
      o.workers = std::stoi(value());
    } else if (a == "--rendezvous") {
      o.rendezvous = value();
    } else if (a == "--prefix") {
      o.prefix = value();
    } else if (a == "--host") {
      o.host = value();
    } else if (a == "--algorithms") {
      o.algorithms.clear();
      std::stringstream list(value());
      for (std::string name; std::getline(list, name, ',');) {
        if (name != "AllreduceRingChunked" && name != "AllreduceRing" &&
            name != "AllreduceHalvingDoubling") {
          Usage("unknown algorithm " + name);
        }
        o.algorithms.push_back(name);
      }
    } else {
      Usage("unknown argument " + a);
    }
  }
  if (o.workers < 1 || o.rank < 0 || o.rank >= o.workers) {
    Usage("need --workers N >= 1 and 0 <= --rank < N");
  }
  if (o.rendezvous.empty()) Usage("need --rendezvous DIR");
  return o;
}

// Runs `algorithm` on `data` (count floats) warmup + iters times and returns
// the local per-iteration times in microseconds (timed iterations only),
// followed by one more entry: the minor page faults per timed iteration.
template <typename Algorithm>
std::vector<double> TimeAlgorithm(
    Algorithm& algorithm, gloo::BarrierAllToAll& barrier, float* data, int count, float mine,
    float expected, const baselines::SweepOptions& options,
    std::int64_t* wrong) {
  std::vector<double> local_us(static_cast<std::size_t>(options.iters));
  double faults = 0;
  for (int it = -options.warmup; it < options.iters; ++it) {
    std::fill(data, data + count, mine);
    const double f0 = baselines::MinorFaults();
    barrier.run();
    const auto t0 = std::chrono::steady_clock::now();
    algorithm.run();
    const auto t1 = std::chrono::steady_clock::now();
    const double f1 = baselines::MinorFaults();
    *wrong += baselines::CountWrong(data, count, expected);
    if (it >= 0) {
      faults += f1 - f0;
      local_us[static_cast<std::size_t>(it)] =
          std::chrono::duration<double, std::micro>(t1 - t0).count();
    }
  }
  local_us.push_back(faults / options.iters);
  return local_us;
}

int Run(const baselines::SweepOptions& sweep, const GlooOptions& o) {
  gloo::transport::tcp::attr attr;
  attr.hostname = o.host;  // 127.0.0.1: the device binds to loopback
  attr.ai_family = AF_INET;
  auto device = gloo::transport::tcp::CreateDevice(attr);

  gloo::rendezvous::FileStore file_store(o.rendezvous);
  gloo::rendezvous::PrefixStore store(o.prefix, file_store);
  auto context =
      std::make_shared<gloo::rendezvous::Context>(o.rank, o.workers);
  context->setTimeout(std::chrono::seconds(120));
  context->connectFullMesh(store, device);
  std::shared_ptr<gloo::Context> ctx = context;

  const std::vector<std::int64_t> sizes = baselines::SweepSizes(sweep);
  const std::int64_t max_count = sizes.back() / 4;
  const float mine = baselines::Contribution(o.rank);
  const float expected = baselines::ExpectedSum(o.workers);
  std::vector<float> data(static_cast<std::size_t>(max_count), mine);  // touched
  gloo::BarrierAllToAll barrier(ctx);

  for (std::int64_t bytes : sizes) {
    const int count = static_cast<int>(bytes / 4);
    for (const std::string& name : o.algorithms) {
      std::int64_t wrong = 0;
      std::vector<double> local_us;
      std::vector<float*> ptrs = {data.data()};
      if (name == "AllreduceRingChunked") {
        gloo::AllreduceRingChunked<float> algorithm(ctx, ptrs, count);
        local_us = TimeAlgorithm(algorithm, barrier, data.data(), count,
                                 mine, expected, sweep, &wrong);
      } else if (name == "AllreduceHalvingDoubling") {
        gloo::AllreduceHalvingDoubling<float> algorithm(ctx, ptrs, count);
        local_us = TimeAlgorithm(algorithm, barrier, data.data(), count,
                                 mine, expected, sweep, &wrong);
      } else {
        gloo::AllreduceRing<float> algorithm(ctx, ptrs, count);
        local_us = TimeAlgorithm(algorithm, barrier, data.data(), count,
                                 mine, expected, sweep, &wrong);
      }
      // Slowest rank per iteration (and most faults), and wrong elements
      // summed over ranks.
      std::vector<double*> time_ptrs = {local_us.data()};
      gloo::AllreduceRing<double> max_times(
          ctx, time_ptrs, static_cast<int>(local_us.size()),
          gloo::ReductionFunction<double>::max);
      max_times.run();
      const double faults = local_us.back();
      local_us.pop_back();
      double wrong_total = static_cast<double>(wrong);
      std::vector<double*> wrong_ptrs = {&wrong_total};
      gloo::AllreduceRing<double> sum_wrong(ctx, wrong_ptrs, 1);
      sum_wrong.run();
      if (o.rank == 0) {
        baselines::PrintResult("gloo", name.c_str(), sweep, o.workers, bytes,
                               local_us,
                               static_cast<std::int64_t>(wrong_total), faults);
      }
    }
  }
  // Leave together. A rank that gets through this barrier first closes its
  // sockets on exit, and a peer still inside it may then see "Connection
  // closed by peer" (seen once in ~10 sweeps). Every result is in by now, so
  // that is reported but not a failure.
  std::fflush(stdout);
  try {
    barrier.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "gloo_allreduce_bench rank %d: after the sweep (ignored): %s\n",
                 o.rank, e.what());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  baselines::SweepOptions sweep;
  std::vector<std::string> rest =
      baselines::ParseSweepOptions(argc, argv, &sweep);
  GlooOptions options;
  try {
    options = ParseGlooOptions(rest);
    return Run(sweep, options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_allreduce_bench rank %d: %s\n", options.rank,
                 e.what());
    return 1;
  }
}
