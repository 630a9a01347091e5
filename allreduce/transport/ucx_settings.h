// UCX's words, read and chosen: the UCX settings the testbed applies unless
// the user set their own, which transports an endpoint's lanes use (for the
// results' transport column), whether to ask UCX for peer failure detection,
// and how device memory meets UCX (--gpu-path). Kept beside the UCX transport
// so that what the testbed knows about UCX lives in one folder.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "allreduce/memory.h"

namespace testbed {

// One UCX environment variable as the testbed sets it.
struct UcxSetting {
  std::string name;   // "UCX_TCP_TX_SEG_SIZE"
  std::string value;  // "256K"
};

// The testbed's UCX defaults (ucx_settings.cc says what each bought, measured):
// set in a worker's environment before UCX reads it, each only where the user
// set none of its group (a segment size's TX and RX go together: UCX refuses
// an RX segment smaller than the TX one). Returns the settings it applied.
std::vector<UcxSetting> ApplyUcxDefaults();

// What a row records of the UCX settings that ran: every UCX_* variable of
// `environment` (a NULL-terminated "NAME=value" array, such as environ), sorted,
// joined by spaces, those in `applied` marked as the testbed's with a
// trailing '*': "UCX_NET_DEVICES=lo UCX_TCP_RX_SEG_SIZE=256K* UCX_TLS=tcp".
std::string DescribeUcxEnvironment(const char* const* environment,
                                   const std::vector<UcxSetting>& applied);

// The transports/devices of an endpoint's lanes, from ucp_ep_print_info's
// text: "tcp/lo.0", "posix/memory+cma/memory".
std::string UcxLanes(const std::string& endpoint_info);

// A transport label ("ucx:tcp/lo.0+cuda_ipc/cuda") less its CUDA lanes
// (cuda_copy, cuda_ipc, gdr_copy): UCX lists them on every endpoint where it
// has them, but only device memory handed to UCX directly travels on them.
std::string WithoutCudaLanes(const std::string& label);

// Whether UCX endpoints should ask for peer failure detection: "auto" turns it
// on unless UCX_TLS names only transports that cannot provide it (UCX 1.13's
// shared memory), where asking for it would leave UCX no transport at all.
bool WantPeerErrorHandling(const std::string& setting, const char* ucx_tls);

// --gpu-path: how device memory meets the network.
//   kDirect  device pointers go to UCX as they are (its cuda_copy/cuda_ipc
//            transports move them); only where UCX reports CUDA memory.
//   kStaged  copied through host memory around each transfer.
//   kAuto    direct where UCX reports CUDA memory and the memory is cuda,
//            else staged.
// Specs spell it as proto::GpuPath (proto/vocabulary.proto).
enum class GpuPathRequest { kAuto, kDirect, kStaged };

// Whether UCP's memory_types (ucp_context_query's bit mask, bit i =
// ucs_memory_type_t i) include CUDA device memory. That, not how UCX was
// built, decides: a UCX built with CUDA reports host only on a machine whose
// driver or GPU it cannot use.
bool UcxHandlesCuda(std::uint64_t ucx_memory_types);

// What a rank's rows say in gpu_path for an all-reduce over UCX: "none"
// (host or pinned memory), "staged" or "direct"; or, for a request that
// cannot be honoured, FailedPrecondition in one line naming the reason, to be
// reported before anything runs. Direct on a UCX without CUDA memory is
// refused whatever the memory (Debian's UCX 1.13 crashes when handed a device
// pointer); fake-device memory is host pages UCX must never touch, so it is
// staged or refused.
absl::StatusOr<std::string> ResolveGpuPath(GpuPathRequest request, MemoryType memory,
                                           std::uint64_t ucx_memory_types);

}  // namespace testbed
