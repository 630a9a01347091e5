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
    ops_.push_back(Pending{peer, tag, {}, std::move(send)});
    traffic_[peer].bytes_sent += data.size;
    traffic_[peer].messages_sent += 1;
    return absl::OkStatus();
  }

  absl::Status PostRecv(int peer, std::uint64_t tag, MutableBuffer data) override {
    if (absl::Status st = CheckPeer(peer); !st.ok()) return st;
    ops_.push_back(Pending{peer, tag, data, nullptr});
    return absl::OkStatus();
  }

  absl::Status WaitAll() override {
    while (reported_ < ops_.size()) {
      if (absl::StatusOr<std::size_t> done = WaitAny(); !done.ok()) return done.status();
    }
    ops_.clear();
    first_unreported_ = 0;
    reported_ = 0;
    return absl::OkStatus();
  }

  absl::StatusOr<std::size_t> WaitAny() override {
    if (reported_ == ops_.size()) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", rank_, ": WaitAny with nothing pending"));
    }
    const auto deadline = std::chrono::steady_clock::now() + fabric_.timeout_;
    std::unique_lock lock(fabric_.mu_);
    while (true) {
      for (std::size_t i = first_unreported_; i < ops_.size(); ++i) {
        Pending& op = ops_[i];
        if (op.reported) continue;
        absl::StatusOr<bool> done = TryComplete(lock, op);
        if (!done.ok()) return done.status();
        if (*done) return Report(i);
      }
      // Nothing ready: fail on a lost peer, else sleep until something changes.
      const Pending* waiting = nullptr;
      for (std::size_t i = first_unreported_; i < ops_.size(); ++i) {
        if (ops_[i].reported) continue;
        if (waiting == nullptr) waiting = &ops_[i];
        if (fabric_.lost_[ops_[i].peer]) {
          return absl::UnavailableError(
              absl::StrCat("rank ", rank_, ": lost connection to rank ", ops_[i].peer));
        }
      }
      if (fabric_.changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
        return absl::DeadlineExceededError(absl::StrCat(
            "rank ", rank_, " waited ", fabric_.timeout_.count(), " ms for ",
            waiting->send == nullptr ? "a message" : "its receive", " from rank ", waiting->peer));
      }
    }
  }

  std::vector<PeerTraffic> Traffic() const override { return traffic_; }
  void ResetTraffic() override { traffic_.assign(traffic_.size(), PeerTraffic{}); }

 private:
  struct Pending {
    int peer;
    std::uint64_t tag;
    MutableBuffer data;                                  // receives only
    std::shared_ptr<InProcessFabric::PendingSend> send;  // sends only
    bool reported = false;                               // by WaitAny()
  };

  absl::Status CheckPeer(int peer) const {
    if (peer < 0 || peer >= world_size() || peer == rank_) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": bad peer ", peer));
    }
    return absl::OkStatus();
  }

  // Whether `op` has completed; a receive whose message is published is
  // completed here, by copying it. Called with the fabric's lock held.
  absl::StatusOr<bool> TryComplete(std::unique_lock<std::mutex>& lock, Pending& op) {
    if (op.send != nullptr) return op.send->consumed;
    auto it = fabric_.published_.find(InProcessFabric::Key{op.peer, rank_, op.tag});
    if (it == fabric_.published_.end()) return false;
    std::shared_ptr<InProcessFabric::PendingSend> send = std::move(it->second);
    fabric_.published_.erase(it);
    if (send->data.size != op.data.size) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, " expected ", op.data.size,
                                                     " bytes from rank ", op.peer, " (tag ", op.tag,
                                                     ") but got ", send->data.size));
    }
    // Copy without the lock, so ranks copy in parallel; the sender's span
    // stays valid until `consumed` is set. One copy, by the memories' own
    // operations (a device's memory is not host code's to touch).
    ++fabric_.copying_from_[op.peer];
    lock.unlock();
    CopyAcross(op.data, send->data);
    lock.lock();
    --fabric_.copying_from_[op.peer];
    send->consumed = true;
    traffic_[op.peer].bytes_received += op.data.size;
    traffic_[op.peer].messages_received += 1;
    fabric_.changed_.notify_all();
    return true;
  }

  std::size_t Report(std::size_t index) {
    ops_[index].reported = true;
    ++reported_;
    while (first_unreported_ < ops_.size() && ops_[first_unreported_].reported) {
      ++first_unreported_;
    }
    return index;
  }

  InProcessFabric& fabric_;
  const int rank_;
  std::vector<Pending> ops_;          // posted since the last WaitAll(), in order
  std::size_t first_unreported_ = 0;  // ops_ before it are all reported
  std::size_t reported_ = 0;          // how many of ops_ are
  std::vector<PeerTraffic> traffic_;
};

InProcessFabric::InProcessFabric(int world_size, std::chrono::milliseconds timeout)
    : world_size_(world_size),
      timeout_(timeout),
      lost_(world_size, false),
      copying_from_(world_size, 0) {}

std::unique_ptr<Transport> InProcessFabric::Connect(int rank) {
  return std::make_unique<InProcessTransport>(*this, rank);
}

void InProcessFabric::MarkLost(int rank) {
  std::unique_lock lock(mu_);
  lost_[rank] = true;
  std::erase_if(published_, [rank](const auto& entry) { return std::get<0>(entry.first) == rank; });
  changed_.notify_all();
  changed_.wait(lock, [&] { return copying_from_[rank] == 0; });
}

}  // namespace testbed
