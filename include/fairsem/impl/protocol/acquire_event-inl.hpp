#pragma once

// The events an acquire's state machine is told (AcquireEvent, acquire_fsm.hpp): how each is
// made. The machine itself is in acquire_fsm-inl.hpp and acquire_fsm_end-inl.hpp.

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/protocol/acquire_fsm.hpp"

#include <utility>

namespace fairsem::detail {

namespace acquire_event_helpers {

FAIRSEM_INLINE AcquireEvent event(AcquireEvent::Kind kind, AcquireEvent::Clock::time_point now) {
  AcquireEvent e;
  e.kind = kind;
  e.now = now;
  return e;
}

}  // namespace acquire_event_helpers

// --- AcquireEvent -----------------------------------------------------------------------------

FAIRSEM_INLINE AcquireEvent AcquireEvent::start(Clock::time_point at) {
  return acquire_event_helpers::event(Kind::start, at);
}

FAIRSEM_INLINE AcquireEvent AcquireEvent::admitted(Clock::time_point at) {
  return acquire_event_helpers::event(Kind::admitted, at);
}

FAIRSEM_INLINE AcquireEvent AcquireEvent::replied(AcquireReply answer, Clock::time_point sent_at,
                                                  Clock::time_point at) {
  AcquireEvent e = acquire_event_helpers::event(Kind::replied, at);
  e.reply = std::move(answer);
  e.sent = sent_at;
  return e;
}

FAIRSEM_INLINE AcquireEvent AcquireEvent::failed(bool may_have_reached, Clock::time_point at,
                                                 bool passing) {
  AcquireEvent e = acquire_event_helpers::event(Kind::failed, at);
  e.reached = may_have_reached;
  e.transient = passing;
  return e;
}

FAIRSEM_INLINE AcquireEvent AcquireEvent::woken(WakeUp wake_up, Clock::time_point at) {
  AcquireEvent e = acquire_event_helpers::event(Kind::woken, at);
  e.wake = std::move(wake_up);
  return e;
}

FAIRSEM_INLINE AcquireEvent AcquireEvent::interrupted(Clock::time_point at) {
  return acquire_event_helpers::event(Kind::interrupted, at);
}

FAIRSEM_INLINE AcquireEvent AcquireEvent::refused(std::string message, bool passes,
                                                  Clock::time_point at) {
  AcquireEvent e = acquire_event_helpers::event(Kind::refused, at);
  e.error = std::move(message);
  e.transient = passes;
  return e;
}

FAIRSEM_INLINE AcquireEvent AcquireEvent::replicas(long long count, Clock::time_point at) {
  AcquireEvent e = acquire_event_helpers::event(Kind::replicas, at);
  e.acked = count;
  return e;
}

FAIRSEM_INLINE AcquireEvent AcquireEvent::done(Clock::time_point at) {
  return acquire_event_helpers::event(Kind::done, at);
}

FAIRSEM_INLINE AcquireEvent AcquireEvent::tick(Clock::time_point at) {
  return acquire_event_helpers::event(Kind::tick, at);
}

FAIRSEM_INLINE AcquireEvent AcquireEvent::cancelled(Clock::time_point at) {
  return acquire_event_helpers::event(Kind::cancelled, at);
}

}  // namespace fairsem::detail
