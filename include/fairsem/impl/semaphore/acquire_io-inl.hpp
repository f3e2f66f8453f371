#pragma once

// AcquireIo (acquire_io.hpp): the I/O of one acquire, as its state machine asks for it.

#include "fairsem/impl/config.hpp"

#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "fairsem/impl/scope_exit.hpp"
#include "fairsem/impl/semaphore/acquire_io.hpp"
#include "fairsem/impl/semaphore/semaphore_core.hpp"

namespace fairsem::detail {

FAIRSEM_INLINE AcquireIo::AcquireIo(SemaphoreCore& core, long long units)
    : core_(core), units_(units), id_(core.next_id()) {}

FAIRSEM_INLINE AcquireIo::~AcquireIo() = default;

FAIRSEM_INLINE AcquireEvent AcquireIo::perform(const AcquireAction& action) {
  using Kind = AcquireAction::Kind;
  if (action.kind == Kind::send_try || action.kind == Kind::send_queue ||
      action.kind == Kind::poll) {
    return call(action);
  }
  try {
    switch (action.kind) {
      case Kind::subscribe:
        wake_up_ = core_.subscribe(id_, conn(), hook_, sent_);
        break;
      case Kind::rearm:
        // A wake-up delivered while the poll was out stays (WakeSubscription::rearm): the next
        // wait reads it, against the ticket the poll's reply gave.
        wake_up_->rearm(conn(), sent_);
        break;
      case Kind::await_replicas:
        wake_up_.reset();
        acked_ = core_.wait_replicas(conn());
        return AcquireEvent::replicas(acked_, Clock::now());
      case Kind::grant:
        wake_up_.reset();
        permit_ = core_.make_permit(id_, action.reply, action.sent);
        break;
      case Kind::leave:
        wake_up_.reset();
        // A failure is the machine's to judge, not the acquire's error: that stays.
        if (const std::exception_ptr failed = core_.leave(conn_, id_, action.ticket)) {
          return AcquireEvent::failed(true, Clock::now(), detail::passes(failed));
        }
        break;
      case Kind::leave_later:
        wake_up_.reset();
        core_.leave_later(id_, action.ticket, action.until.value_or(Clock::now()));
        break;
      case Kind::report:
        core_.wake_up_refused(action.error);
        break;
      default:
        break;  // waiting and finishing are the driver's
    }
  } catch (...) {
    error_ = std::current_exception();
    return AcquireEvent::failed(true, Clock::now(), detail::passes(error_));
  }
  return AcquireEvent::done(Clock::now());
}

FAIRSEM_INLINE AcquireEvent AcquireIo::call(const AcquireAction& action) {
  bool reached = false;
  try {
    // A connection of the pool for each call, none while waiting: the wake-up comes through the
    // Client's waker. Borrowed and connected first (an idle one to a server that went away,
    // again), by the deadline, so that a failure to connect leaves nothing to undo.
    if (!conn_) conn_.emplace(core_, action.until);
    Connection& c = **conn_;
    const ScopeExit interruptible([&c] { c.set_interrupt(nullptr); });
    c.set_interrupt(&interrupted_);
    c.connect_by(action.until);
    reached = true;
    const auto sent = Clock::now();
    sent_ = sent;
    AcquireReply reply =
        core_.run_acquire(c, id_, action.kind == AcquireAction::Kind::send_try ? "try" : "queue",
                          units_, action.ticket, action.fresh);
    turn_.reset();  // the ticket is drawn: the next request may draw its own
    return AcquireEvent::replied(std::move(reply), sent, Clock::now());
  } catch (const QueueFullError&) {
    // Refused before writing anything: no entry to leave.
    turn_.reset();
    error_ = std::current_exception();
    return AcquireEvent::failed(false, Clock::now(), false);
  } catch (...) {
    turn_.reset();  // the first call failed: the next request need not wait for the clean-up
    error_ = std::current_exception();
    // A broken connection goes back to the pool as it is: the next call reconnects it.
    return AcquireEvent::failed(reached, Clock::now(), detail::passes(error_));
  }
}

FAIRSEM_INLINE Connection& AcquireIo::conn() {
  if (!conn_) conn_.emplace(core_);
  return **conn_;
}

FAIRSEM_INLINE AcquireEvent AcquireIo::wait(Clock::time_point until) {
  let_go();
  // Woken by the release (or reap) that promotes this waiter; when nothing comes the machine
  // polls, which renews the queue entry and reports promotion, so a lost wake-up costs one poll.
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
  if (wake_up_ && left > std::chrono::milliseconds(0)) {
    if (auto came = event_of(wake_up_->wait_for(left))) return std::move(*came);
  } else if (auto came = take()) {
    return std::move(*came);
  } else if (left > std::chrono::milliseconds(0)) {
    std::this_thread::sleep_for(left);  // nothing to listen to: only time can come
  }
  return AcquireEvent::tick(Clock::now());
}

FAIRSEM_INLINE std::optional<AcquireEvent> AcquireIo::take() {
  if (!wake_up_) return std::nullopt;
  return event_of(wake_up_->take());
}

FAIRSEM_INLINE std::optional<AcquireEvent> AcquireIo::event_of(WakeWait waited) {
  const auto now = Clock::now();
  if (waited.woken) {
    try {
      return AcquireEvent::woken(detail::decode_wake(*waited.woken), now);
    } catch (...) {
      error_ = std::current_exception();
      return AcquireEvent::failed(true, now);
    }
  }
  if (waited.interrupted) return AcquireEvent::interrupted(now);
  if (waited.error.empty()) return std::nullopt;
  const bool transient = is_transient(waited.error);
  return AcquireEvent::refused(std::move(waited.error), transient, now);
}

FAIRSEM_INLINE void AcquireIo::let_go() noexcept {
  conn_.reset();
  turn_.reset();
}

FAIRSEM_INLINE std::exception_ptr AcquireIo::error(AcquireOutcome outcome) const {
  if (outcome != AcquireOutcome::failed) return core_.acquire_error(outcome, id_, units_, acked_);
  if (error_) return error_;
  return std::make_exception_ptr(std::logic_error("fairsem: an acquire failed with no error"));
}

}  // namespace fairsem::detail
