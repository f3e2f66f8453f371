#pragma once

// What the unit tests read of an AcquireFsm (acquire_fsm.hpp) and its driver does not need:
// the class declares this struct its friend.

#include "fairsem/impl/protocol/acquire_fsm.hpp"

namespace fairsem::detail {

struct AcquireFsmPeer {
  /// True when the request only tries: try_acquire, or a deadline passed when it was made.
  static bool tries(const AcquireFsm& fsm) noexcept { return fsm.tries_; }
};

}  // namespace fairsem::detail
