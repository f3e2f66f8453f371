#pragma once

// What tests read of the internal classes' state that the library itself never asks for: each
// class names TestProbe its friend, so that these accessors stay out of its interface.

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "fairsem/impl/runtime/call_batcher.hpp"
#include "fairsem/impl/wake/waker.hpp"

namespace fairsem::detail {

struct TestProbe {
  /// Batches of more than one call that went out so far.
  static std::uint64_t batches(const CallBatcher& batcher) {
    std::lock_guard<std::mutex> lock(batcher.mu_);
    return batcher.batches_;
  }
  /// Whether a call or a batch is out.
  static bool busy(const CallBatcher& batcher) {
    std::lock_guard<std::mutex> lock(batcher.mu_);
    return batcher.sending_;
  }
  /// How many calls wait for their turn.
  static std::size_t queued(const CallBatcher& batcher) {
    std::lock_guard<std::mutex> lock(batcher.mu_);
    return batcher.queue_.size();
  }
  /// How many lanes a waker has (each a BRPOP and a connection while listened through).
  static std::size_t lanes(const Waker& waker) {
    std::lock_guard<std::mutex> lock(waker.mu_);
    return waker.lanes_.size();
  }
};

}  // namespace fairsem::detail
