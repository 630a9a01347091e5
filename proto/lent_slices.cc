#include "proto/lent_slices.h"

#include <condition_variable>
#include <mutex>

namespace testbed {

grpc::Slice SharedSlice(std::span<const std::byte> data, std::shared_ptr<const void> owner) {
  auto* held = new std::shared_ptr<const void>(std::move(owner));
  // gRPC's constructor takes a mutable pointer; it never writes a send slice.
  return grpc::Slice(const_cast<std::byte*>(data.data()), data.size(),
                     [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); }, held);
}

struct LentSlices::State {
  std::mutex mu;
  std::condition_variable returned_cv;
  std::size_t outstanding = 0;  // guarded by mu
  bool owner_alive = true;      // guarded by mu
};

LentSlices::LentSlices() : state_(new State) {}

LentSlices::~LentSlices() {
  bool last;
  {
    std::lock_guard lock(state_->mu);
    state_->owner_alive = false;
    last = state_->outstanding == 0;
  }
  if (last) delete state_;
}

grpc::Slice LentSlices::Lend(const std::byte* data, std::size_t size) {
  {
    std::lock_guard lock(state_->mu);
    ++state_->outstanding;
  }
  // gRPC's constructor takes a mutable pointer; it never writes a send slice.
  return grpc::Slice(const_cast<std::byte*>(data), size, &LentSlices::Return, state_);
}

void LentSlices::Return(void* opaque) {
  State* state = static_cast<State*>(opaque);
  bool last;
  {
    std::lock_guard lock(state->mu);
    --state->outstanding;
    last = state->outstanding == 0 && !state->owner_alive;
    state->returned_cv.notify_all();
  }
  if (last) delete state;
}

std::size_t LentSlices::outstanding() const {
  std::lock_guard lock(state_->mu);
  return state_->outstanding;
}

bool LentSlices::WaitAllReturned(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(state_->mu);
  return state_->returned_cv.wait_until(lock, deadline, [&] { return state_->outstanding == 0; });
}

}  // namespace testbed
