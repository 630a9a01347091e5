#include "experiments/cluster/netns_fabric.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/ethernet_frame.h"

extern char** environ;

namespace testbed {
namespace fs = std::filesystem;

namespace {

constexpr const char* kIp = "ip";
constexpr const char* kTc = "tc";
constexpr const char* kBridge = "br0";
constexpr const char* kHubHarnessPort = "harness";
// Addresses: 10.213.K.0/24 per set, K chosen so the harness link's route does
// not shadow anything the root namespace already reaches.
constexpr int kSubnetA = 10, kSubnetB = 213;
constexpr int kMaxNodes = 250;
// Serializes set creation across concurrent runs, so two never pick one subnet.
constexpr const char* kLockFile = "/run/testbed-netns.lock";

// The owner PID of a name tb<PID>..., or -1.
long OwnerPid(const std::string& name) {
  if (name.rfind("tb", 0) != 0) return -1;
  std::size_t end = 2;
  while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
  if (end == 2 || end - 2 > 9) return -1;
  return std::stol(name.substr(2, end - 2));
}

bool ProcessAlive(long pid) { return pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

// What `argv` printed on stdout, or an error with its stderr.
absl::StatusOr<std::string> RunToolOutput(const std::vector<std::string>& argv) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return absl::InternalError("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  // Both outputs are small (a few lines); read stdout, then stderr.
  const auto drain = [](int fd) {
    std::string text;
    char buffer[4096];
    ssize_t n;
    while ((n = read(fd, buffer, sizeof buffer)) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) text.append(buffer, static_cast<std::size_t>(n));
    }
    close(fd);
    return text;
  };
  std::string out = drain(out_pipe[0]);
  std::string err = drain(err_pipe[0]);
  if (spawned != 0) {
    return absl::NotFoundError(absl::StrCat("cannot run ", argv[0], ": ", std::strerror(spawned),
                                            " (apt-get install iproute2)"));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!err.empty() && err.back() == '\n') err.pop_back();
    return absl::FailedPreconditionError(
        absl::StrCat("`", absl::StrJoin(argv, " "), "` failed: ", err.empty() ? "no message" : err));
  }
  return out;
}

std::vector<std::string> NetnsNames() {
  std::vector<std::string> names;
  absl::StatusOr<std::string> listing = RunToolOutput({kIp, "netns", "list"});
  if (!listing.ok()) return names;
  for (absl::string_view line : absl::StrSplit(*listing, '\n', absl::SkipEmpty())) {
    // "tb123-n0 (id: 4)": the name is the first word.
    names.emplace_back(std::string(line.substr(0, line.find(' '))));
  }
  return names;
}

std::vector<std::string> RootLinkNames() {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/sys/class/net", error)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

// A third octet K no address or route of the root namespace uses.
absl::StatusOr<int> FreeSubnet() {
  absl::StatusOr<std::string> addresses = RunToolOutput({kIp, "-4", "-o", "addr", "show"});
  absl::StatusOr<std::string> routes = RunToolOutput({kIp, "-4", "route", "show", "table", "all"});
  if (!addresses.ok()) return addresses.status();
  const std::string taken = *addresses + (routes.ok() ? *routes : "");
  const int start = static_cast<int>(getpid() % 250);
  for (int i = 0; i < 250; ++i) {
    const int k = (start + i) % 250;
    const std::string prefix = absl::StrCat(kSubnetA, ".", kSubnetB, ".", k, ".");
    if (taken.find(prefix) == std::string::npos) return k;
  }
  return absl::ResourceExhaustedError("no free 10.213.K.0/24 subnet for an emulated cluster");
}

// The hub's bridge of rack `rack`.
std::string RackBridge(int rack) { return absl::StrCat("r", rack); }

std::string RateArg(double bps) { return absl::StrCat(static_cast<std::int64_t>(std::llround(bps)), "bit"); }

// Both directions of one node's link: egress of the node's eth0 (what it
// sends) and egress of the bridge port facing it (what it receives).
std::vector<std::vector<std::string>> LimitCommands(const std::string& node_ns,
                                                    const std::string& hub_ns,
                                                    const std::string& hub_port, double bps,
                                                    std::uint64_t queue_us,
                                                    const std::string& node_device =
                                                        NetnsFabric::kNodeDevice) {
  const std::string rate = RateArg(bps);
  const std::string burst = absl::StrCat(TbfBurstBytes(bps));
  // latency: how long a packet may wait in the bucket's queue (its length);
  // the default 20 ms (proto/fabric.proto, link_queue_us) is a switch-like
  // buffer at these rates, enough for TCP to keep the link full without the
  // seconds of queueing a bloated buffer would add.
  const std::string latency = absl::StrCat(queue_us, "us");
  const auto tbf = [&](const std::string& ns, const std::string& dev) {
    return std::vector<std::string>{kTc,    "-n",   ns,    "qdisc",   "replace", "dev",
                                    dev,    "root", "tbf", "rate",    rate,      "burst",
                                    burst,  "latency", latency};
  };
  return {tbf(node_ns, node_device), tbf(hub_ns, hub_port)};
}

class CreationLock {
 public:
  CreationLock() {
    fd_ = open(kLockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~CreationLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }

 private:
  int fd_ = -1;
};

}  // namespace

absl::Status RunTool(const std::vector<std::string>& argv) { return RunToolOutput(argv).status(); }

std::int64_t TbfBurstBytes(double link_rate_bps) {
  const std::int64_t one_ms = static_cast<std::int64_t>(link_rate_bps / 8 / 1000);
  return std::max<std::int64_t>(one_ms, 2 * kEthernetFrameBytes);
}

// The largest offloaded packet whose frames fit a bucket whole: tc charges such
// a packet its payload and every frame's headers, not just the first's.
std::int64_t OffloadBytesThatFit(std::int64_t bucket_bytes) {
  return (bucket_bytes - kFrameHeaderBytes) * kFramePayloadBytes / kEthernetFrameBytes;
}

std::int64_t GsoMaxBytes(const NetnsFabricOptions& options, int node) {
  constexpr std::int64_t kKernelGsoMaxBytes = 65536;
  std::int64_t bytes = kKernelGsoMaxBytes;
  const auto bound_by = [&](double bps) {
    if (bps > 0) bytes = std::min(bytes, OffloadBytesThatFit(TbfBurstBytes(bps)));
  };
  const bool own_rate = static_cast<std::size_t>(node) < options.node_rate_bps.size() &&
                        options.node_rate_bps[node] > 0;
  bound_by(own_rate ? options.node_rate_bps[node] : options.link_rate_bps);
  const int rack = static_cast<std::size_t>(node) < options.rack_of_node.size()
                       ? options.rack_of_node[node]
                       : -1;
  if (rack >= 0 && static_cast<std::size_t>(rack) < options.uplink_rate_bps.size()) {
    bound_by(options.uplink_rate_bps[rack]);
  }
  return bytes;
}

int CleanStaleNetnsSets(std::ostream& log) {
  std::map<std::string, std::vector<std::string>> stale;  // tag -> namespaces
  for (const std::string& name : NetnsNames()) {
    const long pid = OwnerPid(name);
    const std::size_t dash = name.find('-');
    if (pid < 0 || dash == std::string::npos || ProcessAlive(pid)) continue;
    stale[name.substr(0, dash)].push_back(name);
  }
  std::set<std::string> links;
  for (const std::string& link : RootLinkNames()) {
    const long pid = OwnerPid(link);
    if (pid >= 0 && link.back() == 'h' && !ProcessAlive(pid)) {
      links.insert(link);
      stale[link.substr(0, link.size() - 1)];
    }
  }
  for (const auto& [tag, namespaces] : stale) {
    if (links.count(tag + "h") > 0) (void)RunTool({kIp, "link", "del", tag + "h"});
    for (const std::string& ns : namespaces) (void)RunTool({kIp, "netns", "del", ns});
    log << "testbed: removed a stale emulated cluster " << tag << " (its owner, pid "
        << OwnerPid(tag) << ", is gone)\n";
  }
  return static_cast<int>(stale.size());
}

absl::StatusOr<std::unique_ptr<NetnsFabric>> NetnsFabric::Create(
    const NetnsFabricOptions& options) {
  if (options.nodes < 1 || options.nodes > kMaxNodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("an emulated cluster holds 1 to ", kMaxNodes, " nodes, not ", options.nodes));
  }
  if (options.link_rate_bps < 0 || !std::isfinite(options.link_rate_bps)) {
    return absl::InvalidArgumentError("the link rate must be positive");
  }
  if (!options.rack_of_node.empty() &&
      static_cast<int>(options.rack_of_node.size()) != options.nodes) {
    return absl::InvalidArgumentError("the racks name a rack for every node, or none");
  }
  for (int rack : options.rack_of_node) {
    if (rack >= static_cast<int>(options.uplink_rate_bps.size()) || rack < -1) {
      return absl::InvalidArgumentError(
          absl::StrCat("node in rack ", rack, " of ", options.uplink_rate_bps.size()));
    }
  }
  if (geteuid() != 0) {
    return absl::PermissionDeniedError(
        "--network netns needs root (it creates network namespaces, links and tc limits); run "
        "as root, or use the default loopback network");
  }
  std::unique_ptr<NetnsFabric> fabric(new NetnsFabric());
  if (absl::Status st = fabric->Build(options); !st.ok()) {
    fabric->Destroy();
    return st;
  }
  return fabric;
}

absl::Status NetnsFabric::Build(const NetnsFabricOptions& options) {
  CreationLock lock;
  std::ostringstream cleaned;
  CleanStaleNetnsSets(cleaned);
  tag_ = options.owner_tag.empty() ? absl::StrCat("tb", getpid()) : options.owner_tag;
  if (OwnerPid(tag_) < 0 || tag_.size() > 12) {
    return absl::InvalidArgumentError(absl::StrCat("bad set tag '", tag_, "' (tb<PID>[suffix])"));
  }
  nodes_ = options.nodes;
  racks_ = static_cast<int>(options.uplink_rate_bps.size());
  hub_ = tag_ + "-hub";
  harness_link_ = tag_ + "h";
  absl::StatusOr<int> subnet = FreeSubnet();
  if (!subnet.ok()) return subnet.status();
  const std::string net = absl::StrCat(kSubnetA, ".", kSubnetB, ".", *subnet, ".");
  harness_address_ = net + "254";

  std::vector<std::vector<std::string>> commands = {
      {kIp, "netns", "add", hub_},
      {kIp, "-n", hub_, "link", "add", kBridge, "type", "bridge"},
      {kIp, "-n", hub_, "link", "set", kBridge, "up"},
      {kIp, "link", "add", harness_link_, "type", "veth", "peer", "name", kHubHarnessPort, "netns",
       hub_},
      {kIp, "-n", hub_, "link", "set", kHubHarnessPort, "master", kBridge, "up"},
      {kIp, "addr", "add", harness_address_ + "/24", "dev", harness_link_},
      {kIp, "link", "set", harness_link_, "up"},
  };
  if (absl::Status st = BuildRacks(options, commands); !st.ok()) return st;
  for (int i = 0; i < nodes_; ++i) {
    const std::string ns = absl::StrCat(tag_, "-n", i);
    const std::string port = absl::StrCat("n", i);
    const int rack = options.rack_of_node.empty() ? -1 : options.rack_of_node[i];
    const std::string bridge = rack < 0 ? kBridge : RackBridge(rack);
    const double rate = static_cast<std::size_t>(i) < options.node_rate_bps.size() &&
                                options.node_rate_bps[i] > 0
                            ? options.node_rate_bps[i]
                            : options.link_rate_bps;
    node_namespaces_.push_back(ns);
    node_addresses_.push_back(absl::StrCat(net, i + 1));
    std::vector<std::vector<std::string>> node = {
        {kIp, "netns", "add", ns},
        {kIp, "-n", ns, "link", "set", "lo", "up"},
        {kIp, "-n", ns, "link", "add", kNodeDevice, "type", "veth", "peer", "name", port, "netns",
         hub_},
        {kIp, "-n", hub_, "link", "set", port, "master", bridge, "up"},
        {kIp, "-n", ns, "addr", "add", node_addresses_.back() + "/24", "dev", kNodeDevice},
        {kIp, "-n", ns, "link", "set", kNodeDevice, "gso_max_size",
         absl::StrCat(GsoMaxBytes(options, i)), "up"},
    };
    if (rate > 0) {
      for (auto& limit : LimitCommands(ns, hub_, port, rate, options.link_queue_us)) {
        node.push_back(std::move(limit));
      }
    }
    commands.insert(commands.end(), node.begin(), node.end());
  }
  for (const auto& command : commands) {
    if (absl::Status st = RunTool(command); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status NetnsFabric::BuildRacks(const NetnsFabricOptions& options,
                                     std::vector<std::vector<std::string>>& commands) const {
  const int racks = static_cast<int>(options.uplink_rate_bps.size());
  for (int r = 0; r < racks; ++r) {
    const std::string bridge = RackBridge(r);
    const std::string up = absl::StrCat("u", r);
    const std::string down = absl::StrCat("s", r);
    std::vector<std::vector<std::string>> rack = {
        {kIp, "-n", hub_, "link", "add", bridge, "type", "bridge"},
        {kIp, "-n", hub_, "link", "set", bridge, "up"},
        {kIp, "-n", hub_, "link", "add", up, "type", "veth", "peer", "name", down},
        {kIp, "-n", hub_, "link", "set", up, "master", bridge, "up"},
        {kIp, "-n", hub_, "link", "set", down, "master", kBridge, "up"},
    };
    if (options.uplink_rate_bps[r] > 0) {
      // Both ends of the pair live in the hub: each end's egress is one direction.
      for (auto& limit : LimitCommands(hub_, hub_, down, options.uplink_rate_bps[r],
                                       options.link_queue_us, up)) {
        rack.push_back(std::move(limit));
      }
    }
    commands.insert(commands.end(), rack.begin(), rack.end());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<UplinkBytes>> NetnsFabric::UplinkCounters() const {
  std::vector<UplinkBytes> counters;
  for (int r = 0; r < racks_; ++r) {
    UplinkBytes bytes;
    for (const auto& [device, field] :
         {std::pair{absl::StrCat("u", r), &bytes.up}, std::pair{absl::StrCat("s", r), &bytes.down}}) {
      absl::StatusOr<std::string> stats =
          RunToolOutput({kIp, "-n", hub_, "-s", "-j", "link", "show", "dev", device});
      if (!stats.ok()) return stats.status();
      // ..."stats64":{"rx":{"bytes":N,...},"tx":{"bytes":N,...: the tx bytes.
      const std::size_t tx = stats->find("\"tx\":{\"bytes\":");
      if (tx == std::string::npos) {
        return absl::InternalError(absl::StrCat("no tx bytes for ", device, " in: ", *stats));
      }
      *field = std::stoull(stats->substr(tx + 14));
    }
    counters.push_back(bytes);
  }
  return counters;
}

std::vector<std::string> NetnsFabric::ExecPrefix(int node) const {
  return {kIp, "netns", "exec", node_namespaces_.at(node)};
}

void NetnsFabric::Destroy() {
  if (destroyed_) return;
  destroyed_ = true;
  if (!harness_link_.empty()) (void)RunTool({kIp, "link", "del", harness_link_});
  for (const std::string& ns : node_namespaces_) (void)RunTool({kIp, "netns", "del", ns});
  if (!hub_.empty()) (void)RunTool({kIp, "netns", "del", hub_});
}

NetnsFabric::~NetnsFabric() { Destroy(); }

}  // namespace testbed
