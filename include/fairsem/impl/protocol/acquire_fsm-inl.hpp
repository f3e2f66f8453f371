#pragma once

// AcquireFsm (acquire_fsm.hpp): every decision of one acquire, as events in and actions out;
// no I/O. Here the way to its end: the events told, the turn, the first call, listening,
// wake-ups, polls and retries. How it ends (the grant, a give-up, a cancel, the leave) is in
// acquire_fsm_end-inl.hpp.

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/protocol/acquire_fsm.hpp"

#include <algorithm>
#include <utility>
#include <variant>

namespace fairsem::detail {

// --- AcquireFsm -------------------------------------------------------------------------------

FAIRSEM_INLINE AcquireFsm::AcquireFsm(const AcquireParams& params)
    : params_(params),
      // No time to wait: like try_acquire, never queue.
      tries_(!params_.wait || (params_.deadline && *params_.deadline <= params_.started)),
      backoff_(params_.jitter_seed, params_.retry_first, params_.retry_cap) {}

FAIRSEM_INLINE AcquireAction AcquireFsm::resume(const AcquireEvent& event) {
  if (over()) return {};
  now_ = event.now;
  using Kind = AcquireEvent::Kind;
  switch (event.kind) {
    case Kind::start:
      return on_start(event.now);
    case Kind::admitted:
      return on_admitted(event.now);
    case Kind::replied:
      return on_replied(event);
    case Kind::failed:
      return on_failed(event);
    case Kind::woken:
      return on_woken(event);
    case Kind::interrupted:
    case Kind::refused:
      return on_trouble(event);
    case Kind::replicas:
      return on_replicas(event.acked);
    case Kind::done:
      return on_done(event.now);
    case Kind::tick:
      return on_tick(event.now);
    case Kind::cancelled:
      return on_cancelled();
  }
  return {};
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_start(Clock::time_point now) {
  if (!in<Idle>()) return {};
  stage_ = InLine{};
  return in_line(now);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::in_line(Clock::time_point now) {
  // Behind the requests made before this one (admission.hpp). The deadline may pass in line,
  // before anything was sent: nothing to leave then. A try waits for its turn however long.
  if (!tries_ && past_deadline(now)) return finish(AcquireOutcome::timed_out);
  AcquireAction a = AcquireAction::of(AcquireAction::Kind::wait_turn);
  if (!tries_) a.until = params_.deadline;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_admitted(Clock::time_point now) {
  if (!in<InLine>()) return {};
  // The turn came after the deadline (it was not checked in time): as if it passed in line.
  if (!tries_ && past_deadline(now)) return finish(AcquireOutcome::timed_out);
  stage_ = Calling{};
  AcquireAction a = call(tries_ ? AcquireAction::Kind::send_try : AcquireAction::Kind::send_queue);
  // A random id drawn for this request has never been sent; a call sent again (retry_step())
  // may follow one that reached the server, and a caller-chosen id may have an entry already.
  a.fresh = !params_.chosen_id;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_replied(const AcquireEvent& event) {
  if (!in<Calling, Polling>()) return {};
  const bool first = in<Calling>();
  entry_ = Entry::known;
  // The server answers: whatever entry the id has now, it lasts a lease from here at most.
  unreachable_ = false;
  backoff_.reset();
  entry_expiry_ = event.now + params_.lease;
  // A poll whose entry was gone (a restart without persistence, a failover to a replica that
  // lacked it, or expired while the server was away) queued it again: a new ticket, at the
  // back of the queue, which reply_ now holds.
  reply_ = event.reply;
  sent_ = event.sent;
  if (!tries_) return queue_reply(first);
  if (reply_.state == AcquireState::granted) return granted();
  return finish(AcquireOutcome::rejected);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::queue_reply(bool first) {
  // Removed on purpose (evicted, or too large after a resize): the entry is gone already, so
  // there is nothing to leave.
  if (reply_.state == AcquireState::evicted) return end(AcquireOutcome::evicted, false);
  if (reply_.state == AcquireState::too_large) return end(AcquireOutcome::too_large, false);
  if (reply_.state == AcquireState::granted) {
    // A wake-up kept while the call was out announced this same grant: one permit, not two.
    kept_wake_.reset();
    return granted();
  }
  // Still queued: listen (again). A wake-up that came while the poll was out is kept: it may
  // be for the entry the poll saw, promoted after the poll ran.
  if (first) {
    stage_ = Subscribing{};
    return AcquireAction::of(AcquireAction::Kind::subscribe);
  }
  stage_ = Rearming{};
  return AcquireAction::of(AcquireAction::Kind::rearm);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_failed(const AcquireEvent& event) {
  // Nothing can fail before the start, and finishing never fails.
  if (in<Idle, Finishing>()) return {};
  if (const Leaving* leaving = std::get_if<Leaving>(&stage_)) {
    // The server went away (again): the leave goes on in the background, until the entry
    // expires. Any other failure leaves the entry to its lease (the driver said why).
    if (event.transient && !leaving->later) {
      unreachable_ = true;
      return leave(leaving->then_finish);
    }
    return left(leaving->then_finish);
  }
  if (event.reached) entry_expiry_ = event.now + params_.lease;
  // An acquire call that may have run unanswered: the first may have queued; a poll that found
  // the entry gone (expired, evicted) queued it again, under a ticket this request was not told.
  if (event.reached && in<Calling>()) entry_ = Entry::unanswered;
  if (event.reached && in<Polling>()) entry_ = Entry::unsure;
  unreachable_ = event.transient;
  // A waiter's poll, or its listening (the first, right after it queued, or again after a
  // poll), that failed in a way that passes keeps the entry, and a wake-up kept meanwhile: the
  // server is restarting, loading or failing over.
  if (event.transient && in<Polling, Subscribing, Rearming>()) return retry(event.now);
  // The deadline passed before the first call could leave (no connection of the pool came
  // free, or none could be made, in time): a time-out, with nothing to leave.
  if (event.transient && in<Calling>() && !sent_first() && !tries_ && past_deadline(event.now)) {
    return finish(AcquireOutcome::timed_out);
  }
  // So does a waiter's first call once it reached the server: it may have queued with its
  // reply lost (the server went away just after), and it is sent again, with the same id, until
  // the server is back; the script answers where that entry stands, or queues it then. One that
  // never reached a server queued nothing: the outage is reported at once.
  if (event.transient && in<Calling>() && !tries_ && sent_first()) {
    return retry(event.now);
  }
  kept_wake_.reset();
  return end(AcquireOutcome::failed, must_leave());
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_woken(const AcquireEvent& event) {
  if (tries_) return {};  // a try never listens
  if (in<Retrying>()) {
    // Its first call not answered yet: no ticket to match a wake-up against; it is read
    // once the call is answered, as while the call is out. The backoff goes on.
    if (!answered()) {
      kept_wake_ = event.wake;
      return retry_step(event.now);
    }
    // A wake-up for this entry says the server is back: it grants, or polls now.
    return wake_up(event.wake, event.now);
  }
  if (in<Waiting>()) return wake_up(event.wake, event.now);
  if (in<Calling, Subscribing, Polling, Rearming, Reporting>()) {
    // Read once the call is answered, against the entry its reply describes (listen()).
    kept_wake_ = event.wake;
    return {};
  }
  return {};  // granted, given up or finished: nothing to wake any more
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_trouble(const AcquireEvent& event) {
  // Retrying: the poll due answers it, when due (the waker is cut off, or refused, each time
  // it tries while the server is away).
  if (in<Retrying>()) return retry_step(event.now);
  // Only while listening: a poll out (or done) answers what a lost wake-up would have said.
  const Waiting* waiting = std::get_if<Waiting>(&stage_);
  if (!waiting) return {};
  // The waker's BRPOP was cut off: a wake-up it popped may be lost, so poll now rather than at
  // the next poll interval.
  if (event.kind == AcquireEvent::Kind::interrupted) return poll_now(event.now);
  // A transient refusal goes straight to the poll; after any other the wait goes on: a
  // wake-up can still come, and the poll follows when due. Said once per wait.
  if (event.transient) return poll_now(event.now);
  if (waiting->reported) return wait_on(event.now);
  stage_ = Reporting{waiting->next_poll};
  AcquireAction a = AcquireAction::of(AcquireAction::Kind::report);
  a.error = event.error;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_done(Clock::time_point now) {
  // A new wait: the next poll is one interval away, and a refused BRPOP is said again.
  if (in<Subscribing, Rearming>()) return listen(now, Waiting{now + params_.poll_interval, false});
  // The same wait goes on, reported.
  if (const Reporting* reporting = std::get_if<Reporting>(&stage_)) {
    return listen(now, Waiting{reporting->next_poll, true});
  }
  if (in<Granting>()) return finish(AcquireOutcome::granted);
  if (const Leaving* leaving = std::get_if<Leaving>(&stage_)) return left(leaving->then_finish);
  if (const Finishing* finishing = std::get_if<Finishing>(&stage_)) {
    if (finishing->then_leave) return leave(std::nullopt);
    stage_ = Over{};
  }
  return {};
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_tick(Clock::time_point now) {
  if (in<InLine>()) return in_line(now);
  if (in<Waiting>()) return wait_on(now);
  if (in<Retrying>()) return retry_step(now);
  return {};  // a timer of an earlier wait: what runs now answers
}

FAIRSEM_INLINE AcquireAction AcquireFsm::listen(Clock::time_point now, Waiting wait) {
  stage_ = wait;
  if (kept_wake_) {
    WakeUp wake = std::move(*kept_wake_);
    kept_wake_.reset();
    // A removal (it names no ticket) kept while a call was out may be of an entry before the
    // one the reply describes: a first call sent again after a lost reply queues anew when the
    // entry the lost one made was evicted meanwhile. The poll says which (the script finds the
    // marker of an evicted entry).
    if (wake.reason != WakeReason::promoted) return poll_now(now);
    return wake_up(wake, now);
  }
  return wait_on(now);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::wake_up(const WakeUp& wake, Clock::time_point now) {
  // An eviction already removed the entry; its marker was consumed by the waker.
  if (wake.reason == WakeReason::evicted) return end(AcquireOutcome::evicted, false);
  if (wake.reason == WakeReason::too_large) return end(AcquireOutcome::too_large, false);
  // A wake-up for an earlier ticket is an earlier entry's, popped before this one was queued but
  // read only now: poll (the poll tells where this entry stands). So is one with another
  // number of slots. A later ticket is this entry's own, promoted under a new ticket (a
  // semaphore with tenants gives each promoted waiter one, drawn after every ticket an earlier
  // entry of the id had: tenants.lua), which becomes the permit's fencing token.
  const bool ours = wake.reason == WakeReason::promoted && wake.ticket >= reply_.ticket &&
                    static_cast<long long>(wake.slots.size()) == params_.units;
  // Promoted: the permit is this entry, with the deadline its last call set (counted from when
  // that call was sent). Taken as it is when the watchdog's next round surely comes with half
  // the usual margin left; otherwise the poll renews it first. With min_replicas the poll
  // always comes first: its WAIT must follow a write of the connection it runs on, and the
  // wake-up was popped on the waker's.
  if (ours && params_.min_replicas == 0 &&
      sent_ + reply_.lease - now > params_.direct_grant_margin) {
    reply_.state = AcquireState::granted;
    reply_.ticket = wake.ticket;
    reply_.slots = wake.slots;
    return grant();
  }
  return poll_now(now);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::wait_on(Clock::time_point now) {
  const Clock::time_point next_poll = std::get<Waiting>(stage_).next_poll;
  if (past_deadline(now) || now >= next_poll) return poll_now(now);
  AcquireAction a = AcquireAction::of(AcquireAction::Kind::wait);
  a.until = params_.deadline ? std::min(next_poll, *params_.deadline) : next_poll;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::poll_now(Clock::time_point now) {
  if (past_deadline(now)) return end(AcquireOutcome::timed_out, true);
  stage_ = Polling{};
  return call(AcquireAction::Kind::poll);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::call(AcquireAction::Kind kind) const {
  AcquireAction a = AcquireAction::of(kind);
  if (kind == AcquireAction::Kind::poll) a.ticket = reply_.ticket;
  // A try's deadline, if any, has passed already: its one call goes as it would without.
  if (!tries_) a.until = params_.deadline;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::retry(Clock::time_point now) {
  stage_ = Retrying{now + backoff_.next()};
  return retry_step(now);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::retry_step(Clock::time_point now) {
  // Given up at the deadline (the leave goes to the background: the server is away). A first
  // call not answered yet leaves its id only if that id is surely its own (must_leave()).
  const Clock::time_point retry_at = std::get<Retrying>(stage_).retry_at;
  if (past_deadline(now)) return end(AcquireOutcome::timed_out, must_leave());
  if (now >= retry_at && !answered()) {
    stage_ = Calling{};
    return call(AcquireAction::Kind::send_queue);
  }
  if (now >= retry_at) {
    stage_ = Polling{};
    return call(AcquireAction::Kind::poll);
  }
  AcquireAction a = AcquireAction::of(AcquireAction::Kind::backoff);
  a.until = params_.deadline ? std::min(retry_at, *params_.deadline) : retry_at;
  return a;
}

FAIRSEM_INLINE bool AcquireFsm::past_deadline(Clock::time_point now) const noexcept {
  return params_.deadline && now >= *params_.deadline;
}

}  // namespace fairsem::detail
