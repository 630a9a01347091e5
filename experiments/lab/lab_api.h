// The lab's JSON endpoints as plain functions of the request's parameters,
// so tests call them without a socket; lab_server.h binds them to paths.
// Bad input - an unknown collective, N or a size out of range, a parameter
// that is not a number - is a 400 whose body is one line saying which and why.
//
// Thread-safety: reentrant; the runner they are given synchronizes itself.
#pragma once

#include <map>
#include <string>

#include "experiments/lab/lab_runner.h"

namespace testbed {

// The query (or form) parameters of a request, as cpp-httplib keeps them.
using LabParams = std::multimap<std::string, std::string>;

struct LabResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body{};
};

// Where this lab's runs go, for the page: the largest N, the daemons, and
// their links' rate when they have links of their own (the emulated cluster).
struct LabInfo {
  int max_workers = 8;
  std::string runs_on = "its own daemons on loopback";
  double link_gbit = 0;  // 0: no rate of their own (loopback, compose)
};

// GET /api/lab: {"max_workers", "runs_on", "link_gbit"}.
LabResponse LabInfoResponse(const LabInfo& info);
// GET /api/collectives: the registry, in its order; "traceable" (every scheduled
// collective, and ps from its protocol) and "parameter_server" (takes servers=S).
LabResponse CollectivesResponse();
// GET /api/trace?collective=ring&n=4&count=8[&servers=S]: lab_trace.h's JSON.
LabResponse TraceResponse(const LabParams& params);
// GET /api/memory?params=7e9&gpus=8[&stages=4&micro_batches=8]: lab_memory.h's JSON.
LabResponse MemoryResponse(const LabParams& params);
// GET /api/model?collective=ring&n=4&bytes=64KiB&alpha_us=50&rate_gbit=10:
// the alpha-beta model's rounds, bottleneck bytes, time and closed-form bytes.
LabResponse ModelResponse(const LabParams& params);
// POST /api/run?collective=ring&n=4&bytes=4KiB[&iters=5]: queues the
// experiment (n at most `max_workers`); {"id", "queued_ahead"}.
LabResponse SubmitRunResponse(const LabParams& params, int max_workers, LabRunner& runner);
// POST /api/zero-traffic?n=4&bytes=1MiB[&iters=5]: queues one experiment of the ring
// all-reduce, reduce-scatter and all-gather; {"id", "queued_ahead"}.
LabResponse SubmitZeroTrafficResponse(const LabParams& params, int max_workers,
                                      LabRunner& runner);
// GET /api/zero-traffic?id=1: {"id", "state", "queued_ahead", "stages", "rows", "error"};
// "stages" (once all three rows are in): ZeRO stages 0-3's measured communication per step,
// {"stage", "collectives", "bytes", "time_us", "bytes_vs_ddp", "time_vs_ddp", "model_vs_ddp"}.
LabResponse ZeroTrafficResponse(const LabParams& params, const LabRunner& runner);
// GET /api/run?id=1: {"id", "state", "queued_ahead", "progress", "rows", "error"}.
LabResponse RunStatusResponse(const LabParams& params, const LabRunner& runner);
// GET /api/run.jsonl?id=1: the run's rows as results-file lines (testbed report reads them).
LabResponse RunRowsResponse(const LabParams& params, const LabRunner& runner);
// GET /api/results: {"rows": [...], "markdown": the course table of every run so far}.
LabResponse ResultsResponse(const LabRunner& runner);

}  // namespace testbed
