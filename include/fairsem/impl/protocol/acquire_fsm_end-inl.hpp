#pragma once

// AcquireFsm (acquire_fsm.hpp): how an acquire ends: granted (after WAIT with min_replicas),
// or given up, leaving the queue first when it must (at once, or in the background while the
// server is unreachable); the outcome delivered once; a cancel heard once, its leave after
// the outcome. The way there (the first call, waiting, wake-ups, polls, retries) is in
// acquire_fsm-inl.hpp.

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/protocol/acquire_fsm.hpp"

#include <optional>
#include <variant>

namespace fairsem::detail {

FAIRSEM_INLINE bool AcquireFsm::must_leave() const noexcept {
  // Nothing sent, nothing to undo.
  if (!sent_first()) return false;
  // A try may have been granted with its reply lost, or its permit could not be set up: given
  // up when its id is surely its own, a random one.
  if (tries_) return !params_.chosen_id;
  // Without a ticket (the first call failed) only a random id is surely this call's own: a
  // caller-chosen one may name another handle's entry, which then must not be removed.
  return reply_.ticket != 0 || !params_.chosen_id;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_replicas(long long acked) {
  if (!in<Replicating>()) return {};
  if (acked >= params_.min_replicas) return grant();
  // A caller-chosen id may be another handle's permit, granted to this call as well: it is
  // left to its lease, never given up here. A random one is given back.
  return end(AcquireOutcome::replication, !params_.chosen_id);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::on_cancelled() {
  if (cancel_heard()) return {};
  kept_wake_.reset();
  // The outcome first: the caller should not wait for a round trip (or, with Redis unreachable,
  // a command timeout). The entry is given up right after.
  //
  // Finishing: decided, not delivered yet: the cancel wins over whatever it was (a permit made is
  // dropped, which releases it; an eviction or an error is not reported), since cancel()
  // promised a CancelledError. Left already if it had to be.
  if (in<Finishing>()) return finish(AcquireOutcome::cancelled);
  // Leaving: the leave dropped for the cancel comes after the outcome.
  if (in<Leaving>()) return finish(AcquireOutcome::cancelled, true);
  // Queued (or granted by a reply or a wake-up not acted on yet): the entry, a permit or not,
  // is given up, which passes a promotion on to the next waiter. So is one that a call whose
  // reply was lost may have made (queued, or granted at once): by ticket 0, now or, while the
  // server is away, in the background until it would expire.
  return finish(AcquireOutcome::cancelled, must_leave());
}

FAIRSEM_INLINE bool AcquireFsm::cancel_heard() const noexcept {
  // Only a cancel delivers `cancelled`, and only its leave comes after the outcome.
  if (const Finishing* finishing = std::get_if<Finishing>(&stage_)) {
    return finishing->outcome == AcquireOutcome::cancelled;
  }
  if (const Leaving* leaving = std::get_if<Leaving>(&stage_)) return !leaving->then_finish;
  return false;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::granted() {
  if (params_.min_replicas == 0) return grant();
  // On the connection whose call granted (or confirmed) the permit.
  stage_ = Replicating{};
  return AcquireAction::of(AcquireAction::Kind::await_replicas);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::grant() {
  stage_ = Granting{};
  AcquireAction a = AcquireAction::of(AcquireAction::Kind::grant);
  a.reply = reply_;
  a.sent = sent_;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::end(AcquireOutcome outcome, bool leave_first) {
  if (!leave_first) return finish(outcome);
  return leave(outcome);
}

FAIRSEM_INLINE AcquireAction AcquireFsm::finish(AcquireOutcome outcome, bool then_leave) {
  stage_ = Finishing{outcome, then_leave};
  AcquireAction a = AcquireAction::of(AcquireAction::Kind::finish);
  a.outcome = outcome;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::leave(std::optional<AcquireOutcome> then_finish) {
  // Ticket 0 names whatever entry the id has: one a lost reply would have named, when the id
  // is surely this request's own.
  const long long ticket = lost_reply() && !params_.chosen_id ? 0 : reply_.ticket;
  if (!unreachable_) {
    stage_ = Leaving{false, then_finish};
    AcquireAction a = AcquireAction::of(AcquireAction::Kind::leave);
    a.ticket = ticket;
    return a;
  }
  // The server is away: waiting for it would hold the outcome up (a deadline would pass by
  // a command's retries, a cancel by minutes). The leave goes on in the background, retried
  // until the entry expires: past that, the server reaps it before it could promote it.
  if (now_ >= entry_expiry_) return left(then_finish);
  stage_ = Leaving{true, then_finish};
  AcquireAction a = AcquireAction::of(AcquireAction::Kind::leave_later);
  a.ticket = ticket;
  a.until = entry_expiry_;
  return a;
}

FAIRSEM_INLINE AcquireAction AcquireFsm::left(std::optional<AcquireOutcome> then_finish) {
  if (then_finish) return finish(*then_finish);
  stage_ = Over{};
  return {};
}

}  // namespace fairsem::detail
