#pragma once

// The names of AcquireFsm's actions, outcomes and events (acquire_fsm.hpp), for what the unit
// tests print: GoogleTest's failure messages and the property test's traces.

#include "fairsem/impl/protocol/acquire_fsm.hpp"

namespace fairsem::test {

inline const char* name_of(detail::AcquireAction::Kind kind) {
  static const char* const kNames[] = {"none",           "wait_turn", "send_try",   "send_queue",
                                       "subscribe",      "wait",      "poll",       "rearm",
                                       "await_replicas", "grant",     "leave",      "report",
                                       "finish",         "backoff",   "leave_later"};
  return kNames[static_cast<int>(kind)];
}

inline const char* name_of(detail::AcquireOutcome outcome) {
  static const char* const kNames[] = {"granted", "rejected",  "timed_out",   "cancelled",
                                       "evicted", "too_large", "replication", "failed"};
  return kNames[static_cast<int>(outcome)];
}

inline const char* name_of(detail::AcquireEvent::Kind kind) {
  static const char* const kNames[] = {"start", "admitted",    "replied",  "failed",
                                       "woken", "interrupted", "refused",  "replicas",
                                       "done",  "tick",        "cancelled"};
  return kNames[static_cast<int>(kind)];
}

}  // namespace fairsem::test
