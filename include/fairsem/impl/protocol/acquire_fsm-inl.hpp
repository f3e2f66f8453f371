#pragma once

// AcquireFsm (acquire_fsm.hpp): every decision of one acquire, from its first call to its
// grant, time-out, cancel or clean-up, as events in and actions out; no I/O.

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/protocol/acquire_fsm.hpp"

#include <algorithm>
#include <utility>

namespace fairsem::detail {

// --- AcquireFsm -------------------------------------------------------------------------------

FAIRSEM_INLINE AcquireFsm::AcquireFsm(const AcquireParams& params)
    : params_(params),
      // No time to wait: like try_acquire, never queue.
      tries_(!params_.wait || (params_.deadline && *params_.deadline <= params_.started)),
      backoff_(params_.jitter_seed, params_.retry_first, params_.retry_cap) {}

FAIRSEM_INLINE AcquireAction AcquireFsm::resume(const AcquireEvent& event) {
  if (stage_ == Stage::over) return {};
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
  if (stage_ != Stage::idle) return {};
  stage_ = Stage::in_line;
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
  if (stage_ != Stage::in_line) return {};
  // The turn came after the deadline (it was not checked in time): as if it passed in line.
  if (!tries_ && past_deadline(now)) return finish(AcquireOutcome::timed_out);
  stage_ = Stage::calling;
  AcquireAction a = call(tries_ ? AcquireAction::Kind::send_try : AcquireAction::Kind::send_queue);
  // A random id drawn for this request has never been sent; a call sent again (retry_step())
  // may follow one that reached the server, and a caller-chosen id may have an entry already.
  a.fresh = !params_.chosen_id;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_replied(const AcquireEvent& event) {
  if (stage_ != Stage::calling && stage_ != Stage::polling) return {};
  const bool first = stage_ == Stage::calling;
  if (first) sent_first_ = true;
  answered_ = true;
  lost_reply_ = false;
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
  stage_ = first ? Stage::subscribing : Stage::rearming;
  return AcquireAction::of(first ? AcquireAction::Kind::subscribe : AcquireAction::Kind::rearm);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_failed(const AcquireEvent& event) {
  // Nothing can fail before the start, and finishing never fails.
  if (stage_ == Stage::idle || stage_ == Stage::finishing) return {};
  if (stage_ == Stage::leaving) {
    // The server went away (again): the leave goes on in the background, until the entry
    // expires. Any other failure leaves the entry to its lease (the driver said why).
    if (event.transient && !left_later_) {
      unreachable_ = true;
      return leave();
    }
    return left();
  }
  if (event.reached) entry_expiry_ = event.now + params_.lease;
  // An acquire call that may have run unanswered: a poll that found the entry gone (expired,
  // evicted) queued it again, under a ticket this request was not told.
  if (event.reached && (stage_ == Stage::calling || stage_ == Stage::polling)) lost_reply_ = true;
  unreachable_ = event.transient;
  // A waiter's poll, or its listening (the first, right after it queued, or again after a
  // poll), that failed in a way that passes keeps the entry, and a wake-up kept meanwhile: the
  // server is restarting, loading or failing over.
  if (event.transient &&
      (stage_ == Stage::polling || stage_ == Stage::subscribing || stage_ == Stage::rearming)) {
    return retry(event.now);
  }
  if (stage_ == Stage::calling) sent_first_ = sent_first_ || event.reached;
  // The deadline passed before the first call could leave (no connection of the pool came
  // free, or none could be made, in time): a time-out, with nothing to leave.
  if (event.transient && stage_ == Stage::calling && !sent_first_ && !tries_ &&
      past_deadline(event.now)) {
    return finish(AcquireOutcome::timed_out);
  }
  // So does a waiter's first call once it reached the server: it may have queued with its
  // reply lost (the server went away just after), and it is sent again, with the same id, until
  // the server is back; the script answers where that entry stands, or queues it then. One that
  // never reached a server queued nothing: the outage is reported at once.
  if (event.transient && stage_ == Stage::calling && !tries_ && sent_first_) {
    return retry(event.now);
  }
  kept_wake_.reset();
  return end(AcquireOutcome::failed, must_leave());
}

FAIRSEM_INLINE bool AcquireFsm::must_leave() const noexcept {
  // Nothing sent, nothing to undo.
  if (!sent_first_) return false;
  // A try may have been granted with its reply lost, or its permit could not be set up: given
  // up when its id is surely its own, a random one.
  if (tries_) return !params_.chosen_id;
  // Without a ticket (the first call failed) only a random id is surely this call's own: a
  // caller-chosen one may name another handle's entry, which then must not be removed.
  return reply_.ticket != 0 || !params_.chosen_id;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_woken(const AcquireEvent& event) {
  if (tries_) return {};  // a try never listens
  switch (stage_) {
    case Stage::retrying:
      // Its first call not answered yet: no ticket to match a wake-up against; it is read
      // once the call is answered, as while the call is out. The backoff goes on.
      if (!answered_) {
        kept_wake_ = event.wake;
        return retry_step(event.now);
      }
      return wake_up(event.wake, event.now);
    case Stage::waiting:
      // Retrying, a wake-up for this entry says the server is back: it grants, or polls now.
      return wake_up(event.wake, event.now);
    case Stage::calling:
    case Stage::subscribing:
    case Stage::polling:
    case Stage::rearming:
    case Stage::reporting:
      // Read once the call is answered, against the entry its reply describes (listen()).
      kept_wake_ = event.wake;
      return {};
    default:
      return {};  // granted, given up or finished: nothing to wake any more
  }
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_trouble(const AcquireEvent& event) {
  // Retrying: the poll due answers it, when due (the waker is cut off, or refused, each time
  // it tries while the server is away).
  if (stage_ == Stage::retrying) return retry_step(event.now);
  // Only while listening: a poll out (or done) answers what a lost wake-up would have said.
  if (stage_ != Stage::waiting) return {};
  // The waker's BRPOP was cut off: a wake-up it popped may be lost, so poll now rather than at
  // the next poll interval.
  if (event.kind == AcquireEvent::Kind::interrupted) return next_step(event.now, true);
  // A transient refusal goes straight to the poll; after any other the wait goes on: a
  // wake-up can still come, and the poll follows when due. Said once per wait.
  if (event.transient) return next_step(event.now, true);
  if (reported_) return next_step(event.now, false);
  reported_ = true;
  stage_ = Stage::reporting;
  AcquireAction a = AcquireAction::of(AcquireAction::Kind::report);
  a.error = event.error;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_replicas(long long acked) {
  if (stage_ != Stage::replicating) return {};
  if (acked >= params_.min_replicas) return grant();
  // A caller-chosen id may be another handle's permit, granted to this call as well: it is
  // left to its lease, never given up here. A random one is given back.
  return end(AcquireOutcome::replication, !params_.chosen_id);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_done(Clock::time_point now) {
  switch (stage_) {
    case Stage::subscribing:
    case Stage::rearming:
      // A new wait: the next poll is one interval away, and a refused BRPOP is said again.
      reported_ = false;
      next_poll_ = now + params_.poll_interval;
      return listen(now);
    case Stage::reporting:
      return listen(now);
    case Stage::granting:
      return finish(AcquireOutcome::granted);
    case Stage::leaving:
      return left();
    case Stage::finishing:
      finished_ = true;
      if (leave_after_finish_) return leave();
      stage_ = Stage::over;
      return {};
    default:
      return {};
  }
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_tick(Clock::time_point now) {
  if (stage_ == Stage::in_line) return in_line(now);
  if (stage_ == Stage::waiting) return next_step(now, false);
  if (stage_ == Stage::retrying) return retry_step(now);
  return {};  // a timer of an earlier wait: what runs now answers
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_cancelled() {
  if (cancel_heard_) return {};
  cancel_heard_ = true;
  kept_wake_.reset();
  // The outcome first: the caller should not wait for a round trip (or, with Redis unreachable,
  // a command timeout). The entry is given up right after.
  switch (stage_) {
    case Stage::finishing:
      // Decided, not delivered yet: the cancel wins over whatever it was (a permit made is
      // dropped, which releases it; an eviction or an error is not reported), since cancel()
      // promised a CancelledError. Left already if it had to be.
      return finish(AcquireOutcome::cancelled);
    case Stage::leaving:
      // The leave dropped for the cancel comes after the outcome.
      leave_after_finish_ = true;
      return finish(AcquireOutcome::cancelled);
    default:
      // Queued (or granted by a reply or a wake-up not acted on yet): the entry, a permit or
      // not, is given up, which passes a promotion on to the next waiter. So is one that a
      // call whose reply was lost may have made (queued, or granted at once): by ticket 0, now
      // or, while the server is away, in the background until it would expire.
      leave_after_finish_ = must_leave();
      return finish(AcquireOutcome::cancelled);
  }
}

FAIRSEM_INLINE AcquireAction AcquireFsm::listen(Clock::time_point now) {
  stage_ = Stage::waiting;
  if (kept_wake_) {
    WakeUp wake = std::move(*kept_wake_);
    kept_wake_.reset();
    // A removal (it names no ticket) kept while a call was out may be of an entry before the
    // one the reply describes: a first call sent again after a lost reply queues anew when the
    // entry the lost one made was evicted meanwhile. The poll says which (the script finds the
    // marker of an evicted entry).
    if (wake.reason != WakeReason::promoted) return next_step(now, true);
    return wake_up(wake, now);
  }
  return next_step(now, false);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::wake_up(const WakeUp& wake, Clock::time_point now) {
  // An eviction already removed the entry; its marker was consumed by the waker.
  if (wake.reason == WakeReason::evicted) return end(AcquireOutcome::evicted, false);
  if (wake.reason == WakeReason::too_large) return end(AcquireOutcome::too_large, false);
  // A wake-up for another ticket is an earlier entry's, popped before this one was queued but
  // read only now: poll (the poll tells where this entry stands). So is one with another
  // number of slots.
  const bool ours = wake.reason == WakeReason::promoted && wake.ticket == reply_.ticket &&
                    static_cast<long long>(wake.slots.size()) == params_.units;
  // Promoted: the permit is this entry, with the deadline its last call set (counted from when
  // that call was sent). Taken as it is when the watchdog's next round surely comes with half
  // the usual margin left; otherwise the poll renews it first. With min_replicas the poll
  // always comes first: its WAIT must follow a write of the connection it runs on, and the
  // wake-up was popped on the waker's.
  if (ours && params_.min_replicas == 0 &&
      sent_ + reply_.lease - now > params_.direct_grant_margin) {
    reply_.state = AcquireState::granted;
    reply_.slots = wake.slots;
    return grant();
  }
  return next_step(now, true);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::next_step(Clock::time_point now, bool poll_now) {
  if (past_deadline(now)) return end(AcquireOutcome::timed_out, true);
  if (poll_now || now >= next_poll_) {
    stage_ = Stage::polling;
    return call(AcquireAction::Kind::poll);
  }
  stage_ = Stage::waiting;
  AcquireAction a = AcquireAction::of(AcquireAction::Kind::wait);
  a.until = params_.deadline ? std::min(next_poll_, *params_.deadline) : next_poll_;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::call(AcquireAction::Kind kind) const {
  AcquireAction a = AcquireAction::of(kind);
  if (kind == AcquireAction::Kind::poll) a.ticket = reply_.ticket;
  // A try's deadline, if any, has passed already: its one call goes as it would without.
  if (!tries_) a.until = params_.deadline;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::retry(Clock::time_point now) {
  retry_at_ = now + backoff_.next();
  return retry_step(now);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::retry_step(Clock::time_point now) {
  // Given up at the deadline (the leave goes to the background: the server is away). A first
  // call not answered yet leaves its id only if that id is surely its own (must_leave()).
  if (past_deadline(now)) return end(AcquireOutcome::timed_out, must_leave());
  if (now >= retry_at_ && !answered_) {
    stage_ = Stage::calling;
    return call(AcquireAction::Kind::send_queue);
  }
  if (now >= retry_at_) {
    stage_ = Stage::polling;
    return call(AcquireAction::Kind::poll);
  }
  stage_ = Stage::retrying;
  AcquireAction a = AcquireAction::of(AcquireAction::Kind::backoff);
  a.until = params_.deadline ? std::min(retry_at_, *params_.deadline) : retry_at_;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::granted() {
  if (params_.min_replicas == 0) return grant();
  // On the connection whose call granted (or confirmed) the permit.
  stage_ = Stage::replicating;
  return AcquireAction::of(AcquireAction::Kind::await_replicas);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::grant() {
  stage_ = Stage::granting;
  AcquireAction a = AcquireAction::of(AcquireAction::Kind::grant);
  a.reply = reply_;
  a.sent = sent_;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::end(AcquireOutcome outcome, bool leave_first) {
  if (!leave_first) return finish(outcome);
  outcome_ = outcome;
  return leave();
}

FAIRSEM_INLINE AcquireAction AcquireFsm::finish(AcquireOutcome outcome) {
  stage_ = Stage::finishing;
  outcome_ = outcome;
  AcquireAction a = AcquireAction::of(AcquireAction::Kind::finish);
  a.outcome = outcome;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::leave() {
  stage_ = Stage::leaving;
  // Ticket 0 names whatever entry the id has: one a lost reply would have named, when the id
  // is surely this request's own.
  const long long ticket = lost_reply_ && !params_.chosen_id ? 0 : reply_.ticket;
  if (!unreachable_) {
    AcquireAction a = AcquireAction::of(AcquireAction::Kind::leave);
    a.ticket = ticket;
    return a;
  }
  // The server is away: waiting for it would hold the outcome up (a deadline would pass by
  // a command's retries, a cancel by minutes). The leave goes on in the background, retried
  // until the entry expires: past that, the server reaps it before it could promote it.
  left_later_ = true;
  if (now_ >= entry_expiry_) return left();
  AcquireAction a = AcquireAction::of(AcquireAction::Kind::leave_later);
  a.ticket = ticket;
  a.until = entry_expiry_;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::left() {
  if (!finished_) return finish(outcome_);
  stage_ = Stage::over;
  return {};
}

FAIRSEM_INLINE bool AcquireFsm::past_deadline(Clock::time_point now) const noexcept {
  return params_.deadline && now >= *params_.deadline;
}

}  // namespace fairsem::detail
