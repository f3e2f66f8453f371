#pragma once

// What the tests read of a Waker (waker.hpp) and the library does not need: the class declares
// this struct its friend.

#include <cstddef>
#include <mutex>

#include "fairsem/impl/wake/waker.hpp"

namespace fairsem::detail {

struct WakerPeer {
  /// How many lanes it has (each a BRPOP and a connection while listened through).
  static std::size_t lanes(const Waker& waker) {
    std::lock_guard<std::mutex> lock(waker.mu_);
    return waker.lanes_.size();
  }
};

}  // namespace fairsem::detail
