// An emulated cluster on one machine: every node (a server or worker daemon)
// in its own network namespace, behind its own veth link to one bridge, each
// link limited to a rate in both directions by tc's token bucket (tbf). The
// collective's traffic then crosses real links of known bandwidth - the regime
// the cost model speaks of - instead of one loopback device that every rank
// shares.
//
//   root namespace            hub namespace (tb<pid>-hub)        node namespaces
//   tb<pid>h 10.213.K.254 ---- harness --+                        (tb<pid>-n<i>)
//                                        br0 --- n<i> (tbf: in) ===== eth0 (tbf: out)
//                                                                      10.213.K.<i+1>
//
// With racks (proto/fabric.proto), br0 is the spine: each rack is a bridge
// r<R> of its own in the hub, joined to br0 by one veth pair - u<R> on the
// rack's side, s<R> on the spine's - whose tbf limits are the rack's uplink
// (u<R>'s egress carries the rack's traffic up, s<R>'s the traffic down).
// Nodes of a rack hang off r<R>; nodes on the spine (the servers) and the
// harness off br0. Every bridge is one L2 segment, so the addresses stay one
// /24 and the cross-rack flows of a rack really share its uplink.
//
// The bridge lives in its own namespace, so the host's firewall and bridge
// netfilter never see the traffic; the root namespace gets only the harness's
// unlimited control link, through which `testbed local` reaches the
// coordinator. Names carry the owner's PID: a set whose owner is gone (a run
// killed with SIGKILL) is removed by CleanStaleNetnsSets, which Create calls.
//
// Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2's `ip` and `tc`.
//
// Thread-safety: one thread creates and destroys a fabric.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace testbed {

struct NetnsFabricOptions {
  int nodes = 1;
  double link_rate_bps = 0;  // each node's link, each direction; 0 = unlimited
  std::string owner_tag;     // default "tb<pid>": names the set; tests use their own
  // Racks: the rack of each node (-1: on the spine); empty, one bridge for all.
  std::vector<int> rack_of_node = {};
  std::vector<double> uplink_rate_bps = {};  // per rack, each direction; 0 = unlimited
  std::vector<double> node_rate_bps = {};    // per node, where > 0 instead of link_rate_bps
  // How long a packet may wait in each shaped link's queue (tbf's latency).
  std::uint64_t link_queue_us = 20'000;
};

// The payload and headers that crossed one rack's uplink, as its veth pair
// counted them.
struct UplinkBytes {
  std::uint64_t up = 0;    // from the rack to the spine
  std::uint64_t down = 0;  // from the spine into the rack
};

class NetnsFabric {
 public:
  // Removes stale sets, then builds namespaces, links, bridge and limits.
  // On failure, what was built is removed again.
  static absl::StatusOr<std::unique_ptr<NetnsFabric>> Create(const NetnsFabricOptions& options);
  ~NetnsFabric();  // Destroy()

  NetnsFabric(const NetnsFabric&) = delete;
  NetnsFabric& operator=(const NetnsFabric&) = delete;

  int nodes() const { return nodes_; }
  const std::string& namespace_of(int node) const { return node_namespaces_[node]; }
  const std::string& address_of(int node) const { return node_addresses_[node]; }
  const std::string& harness_address() const { return harness_address_; }
  const std::string& hub_namespace() const { return hub_; }
  const std::string& tag() const { return tag_; }
  // The device a node's daemon sends through, the same name in every node.
  static constexpr const char* kNodeDevice = "eth0";

  // The argv prefix that runs a program inside node's namespace, with /sys
  // remounted there so the node's own interface counters are what it reads.
  std::vector<std::string> ExecPrefix(int node) const;

  int racks() const { return racks_; }
  // Each rack's uplink counters now (since it was built), in rack order.
  absl::StatusOr<std::vector<UplinkBytes>> UplinkCounters() const;

  // Deletes the namespaces (their links go with them) and the harness link.
  // Idempotent; errors are ignored (whatever is left is stale for the next run).
  void Destroy();

 private:
  NetnsFabric() = default;
  absl::Status Build(const NetnsFabricOptions& options);

  absl::Status BuildRacks(const NetnsFabricOptions& options,
                          std::vector<std::vector<std::string>>& commands) const;

  int nodes_ = 0;
  int racks_ = 0;
  std::string tag_;
  std::string hub_;
  std::string harness_link_;
  std::string harness_address_;
  std::vector<std::string> node_namespaces_;
  std::vector<std::string> node_addresses_;
  bool destroyed_ = false;
};

// Sets named tb<PID>-... whose PID is no longer a running process: their
// namespaces and harness links are deleted. Reports each removal on `log`.
// Returns how many sets were removed.
int CleanStaleNetnsSets(std::ostream& log);

// tbf's token bucket for a rate: 1 ms of the rate, and never less than two
// full Ethernet frames. The bucket is what an idle link passes at once, above
// its rate; the 96 KiB floor it had let an idle 100 Mbit/s link deliver a
// 64 KiB message in no time, so tree at N = 2 measured a third of its model
// (docs/simulator.md, Validation).
std::int64_t TbfBurstBytes(double link_rate_bps);

// The largest segmentation-offload packet node `node` may send (its eth0's
// gso_max_size): one whose frames, headers and all, fit the bucket of its own
// link and of its rack's uplink, and at most the kernel's 64 KiB. A larger one
// tbf splits in software: at 100 Mbit/s with a 2 ms bucket, a ring at N = 8
// kept 1.81 of the 2 cores busy instead of 0.98 (docs/deployments.md).
std::int64_t GsoMaxBytes(const NetnsFabricOptions& options, int node);

// Runs argv (no shell), waits; fails with its stderr when it exits non-zero.
absl::Status RunTool(const std::vector<std::string>& argv);

}  // namespace testbed
