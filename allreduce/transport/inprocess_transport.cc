#include "allreduce/transport/inprocess_transport.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace testbed {

class InProcessTransport final : public Transport {
 public:
  InProcessTransport(InProcessFabric& fabric, int rank)
      : fabric_(fabric), rank_(rank), traffic_(fabric.world_size()) {}

  int rank() const override { return rank_; }
  int world_size() const override { return fabric_.world_size(); }
  std::string_view name() const override { return "inprocess"; }

  absl::Status PostSend(int peer, std::uint64_t tag, ConstBuffer data) override {
    if (absl::Status st = CheckPeer(peer); !st.ok()) return st;
    auto send = std::make_shared<InProcessFabric::PendingSend>();
    send->data = data;
    {
      std::lock_guard lock(fabric_.mu_);
      auto [it, inserted] = fabric_.published_.emplace(InProcessFabric::Key{rank_, peer, tag}, send);
      if (!inserted) {
        return absl::FailedPreconditionError(
            absl::StrCat("rank ", rank_, " sent tag ", tag, " to rank ", peer, " twice"));
      }
    }
    fabric_.changed_.notify_all();
    sends_.push_back(Pending{peer, tag, {}, std::move(send)});
    traffic_[peer].bytes_sent += data.size;
    traffic_[peer].messages_sent += 1;
    return absl::OkStatus();
  }

  absl::Status PostRecv(int peer, std::uint64_t tag, MutableBuffer data) override {
    if (absl::Status st = CheckPeer(peer); !st.ok()) return st;
    recvs_.push_back(Pending{peer, tag, data, nullptr});
    return absl::OkStatus();
  }

  absl::Status WaitAll() override {
    const auto deadline = std::chrono::steady_clock::now() + fabric_.timeout_;
    std::unique_lock lock(fabric_.mu_);
    for (const Pending& recv : recvs_) {
      const InProcessFabric::Key key{recv.peer, rank_, recv.tag};
      std::shared_ptr<InProcessFabric::PendingSend> send;
      absl::Status st = WaitFor(lock, deadline, recv.peer, "a message", [&] {
        auto it = fabric_.published_.find(key);
        if (it == fabric_.published_.end()) return false;
        send = it->second;
        fabric_.published_.erase(it);
        return true;
      });
      if (!st.ok()) return st;
      if (send->data.size != recv.data.size) {
        return absl::InvalidArgumentError(
            absl::StrCat("rank ", rank_, " expected ", recv.data.size, " bytes from rank ",
                         recv.peer, " (tag ", recv.tag, ") but got ", send->data.size));
      }
      // Copy without the lock, so ranks copy in parallel; the sender's span
      // stays valid until `consumed` is set.
      lock.unlock();
      // One copy, by the memories' own operations (a device's memory is not
      // host code's to touch).
      CopyAcross(recv.data, send->data);
      lock.lock();
      send->consumed = true;
      traffic_[recv.peer].bytes_received += recv.data.size;
      traffic_[recv.peer].messages_received += 1;
      fabric_.changed_.notify_all();
    }
    recvs_.clear();
    for (const Pending& send : sends_) {
      absl::Status st = WaitFor(lock, deadline, send.peer, "its receive",
                                [&] { return send.send->consumed; });
      if (!st.ok()) return st;
    }
    sends_.clear();
    return absl::OkStatus();
  }

  std::vector<PeerTraffic> Traffic() const override { return traffic_; }
  void ResetTraffic() override { traffic_.assign(traffic_.size(), PeerTraffic{}); }

 private:
  struct Pending {
    int peer;
    std::uint64_t tag;
    MutableBuffer data;                                  // receives only
    std::shared_ptr<InProcessFabric::PendingSend> send;  // sends only
  };

  absl::Status CheckPeer(int peer) const {
    if (peer < 0 || peer >= world_size() || peer == rank_) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": bad peer ", peer));
    }
    return absl::OkStatus();
  }

  template <typename Ready>
  absl::Status WaitFor(std::unique_lock<std::mutex>& lock,
                       std::chrono::steady_clock::time_point deadline, int peer,
                       std::string_view what, Ready ready) {
    while (!ready()) {
      if (fabric_.lost_[peer]) {
        return absl::UnavailableError(
            absl::StrCat("rank ", rank_, ": lost connection to rank ", peer));
      }
      if (fabric_.changed_.wait_until(lock, deadline) == std::cv_status::timeout && !ready()) {
        return absl::DeadlineExceededError(
            absl::StrCat("rank ", rank_, " waited ", fabric_.timeout_.count(),
                         " ms for ", std::string(what), " from rank ", peer));
      }
    }
    return absl::OkStatus();
  }

  InProcessFabric& fabric_;
  const int rank_;
  std::vector<Pending> sends_;  // posted, not yet known to be consumed
  std::vector<Pending> recvs_;  // posted, not yet filled
  std::vector<PeerTraffic> traffic_;
};

InProcessFabric::InProcessFabric(int world_size, std::chrono::milliseconds timeout)
    : world_size_(world_size), timeout_(timeout), lost_(world_size, false) {}

std::unique_ptr<Transport> InProcessFabric::Connect(int rank) {
  return std::make_unique<InProcessTransport>(*this, rank);
}

void InProcessFabric::MarkLost(int rank) {
  {
    std::lock_guard lock(mu_);
    lost_[rank] = true;
  }
  changed_.notify_all();
}

}  // namespace testbed
