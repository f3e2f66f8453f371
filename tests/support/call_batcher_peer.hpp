#pragma once

// What the tests read of a CallBatcher (call_batcher.hpp) and the library does not need: the
// class declares this struct its friend.

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "fairsem/impl/runtime/call_batcher.hpp"

namespace fairsem::detail {

struct CallBatcherPeer {
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
};

}  // namespace fairsem::detail
