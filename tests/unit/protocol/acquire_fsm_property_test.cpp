// AcquireFsm checked against its contract on random sequences of what can happen to one
// acquire, generated and shrunk by RapidCheck: replies lost (after the server ran the call, or
// before), late or early timers, wake-ups early, duplicated, stale or kept while a call is out,
// evictions, refusals, cancels and deadlines at every step. The world around the machine is a
// driver (it performs each action, or drops it for a cancel, as AsyncAcquire does) and the
// request's entry in Redis as the scripts keep it. After the generated steps the world turns
// calm (every call answered, every timer on time, no cancel) until the machine is over.
//
// The contract: the outcome is delivered (finish performed) exactly once; a cancel told before
// that makes it `cancelled`; a grant is of the entry the server promoted; no wait runs past the
// deadline; and a request that ends without handing its permit to the caller leaves no entry in
// Redis: it leaves (at once or in the background, until the entry would expire), the entry
// expired or was removed by the server, or a leave failed in a way the machine cannot help. A
// caller-chosen id is never left by ticket 0 (it may name another handle's entry), so an entry
// of it whose ticket the machine never learned is excused, as are a try's grant of it and one
// too few replicas acknowledged.
//
// RapidCheck's defaults run 100 sequences (the CI budget); RC_PARAMS="max_success=100000" runs
// more, RC_PARAMS="seed=N" replays one, and a failure prints its shrunk sequence and its trace.

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "acquire_fsm_names.hpp"
#include "acquire_fsm_peer.hpp"
#include "fairsem/impl/protocol/acquire_fsm.hpp"

namespace fairsem::detail {
// Named, not anonymous: a unity build compiles this with acquire_fsm_test.cpp.
namespace acquire_fsm_property {

using Clock = std::chrono::steady_clock;
using Kind = AcquireAction::Kind;
using ms = std::chrono::milliseconds;
using test::name_of;

const Clock::time_point kStart{std::chrono::hours(1)};
constexpr ms kLease{10000};
constexpr ms kPoll{1000};
constexpr long long kStaleTicket = 1;  // an earlier entry's: the model's own start at 100
constexpr int kPicks = 40;             // a step cancels when its pick is 0: one in kPicks

/// One thing the world does, read against what the machine asked for: `dt` ms pass first, then
/// `pick` chooses among the answers that fit the action (0: the cancel, while one may come),
/// `arg` a detail of that answer.
struct Step {
  int pick = 1;
  int arg = 0;
  int dt = 0;
};

void showValue(const Step& s, std::ostream& os) {
  os << "{" << s.pick << "," << s.arg << "," << s.dt << "}";
}

/// The request's entry in Redis, as the scripts keep it for its id.
struct Entry {
  long long ticket = 0;
  bool granted = false;
  Clock::time_point expires;
};

class World {
 public:
  explicit World(const AcquireParams& params) : params_(params), fsm_(params) {}

  /// Drives the machine through `steps`, then calmly until it is over; checks the contract.
  void run(const std::vector<Step>& steps) {
    std::size_t next = 0;
    RC_LOG() << (AcquireFsmPeer::tries(fsm_) ? "a try"
                 : params_.deadline          ? "a wait with a deadline"
                                             : "a wait")
             << (params_.deadline
                     ? " at " + std::to_string((*params_.deadline - kStart) / ms(1)) + "ms"
                     : "")
             << ", " << params_.units << " units" << (params_.chosen_id ? ", a chosen id" : "")
             << (params_.min_replicas > 0 ? ", min_replicas 1" : "") << "\n";
    AcquireAction action = tell(AcquireEvent::start(now_));
    for (int n = 0; !fsm_.over(); ++n) {
      RC_ASSERT(n < 2000);                   // it ends in a calm world
      RC_ASSERT(action.kind != Kind::none);  // nothing asked for, yet not over: stuck
      calm_ = next >= steps.size();
      const Step s = calm_ ? Step{} : steps[next++];
      now_ += ms(s.dt);
      action = answer(action, s);
    }
    check_end();
  }

 private:
  AcquireAction tell(const AcquireEvent& event) {
    const AcquireAction a = fsm_.resume(event);
    // Decided, whether delivered or overtaken by a cancel.
    if (a.kind == Kind::finish && a.outcome == AcquireOutcome::replication) {
      too_few_replicas_ = true;
    }
    RC_LOG() << std::chrono::duration_cast<ms>(now_ - kStart).count() << "ms "
             << name_of(event.kind) << " -> " << name_of(a.kind)
             << (a.kind == Kind::finish ? std::string(" ") + name_of(a.outcome) : "")
             << (a.kind == Kind::leave || a.kind == Kind::leave_later || a.kind == Kind::poll
                     ? " ticket " + std::to_string(a.ticket)
                     : "")
             << "\n";
    return a;
  }

  AcquireAction answer(const AcquireAction& a, const Step& s) {
    // A cancel comes in place of the action, which is dropped (the driver's contract), and
    // only before the outcome was delivered: cancel() returns false after that.
    if (!calm_ && s.pick == 0 && !cancel_told_ && finishes_ == 0) {
      cancel_told_ = true;
      return tell(AcquireEvent::cancelled(now_));
    }
    const int p = calm_ ? -1 : s.pick;
    switch (a.kind) {
      case Kind::wait_turn:
        check_until(a);
        if (p % 3 == 0) return tell(AcquireEvent::tick(now_));
        return tell(AcquireEvent::admitted(now_));
      case Kind::send_try:
      case Kind::send_queue:
      case Kind::poll:
        return call(a, p, s.arg);
      case Kind::subscribe:
      case Kind::rearm:
      case Kind::report:
        if (p % 4 == 1) return kept_wake_up(a, s.arg);
        if (a.kind != Kind::report && p % 4 == 2) {
          return tell(AcquireEvent::failed(true, now_, s.arg % 2 == 0));
        }
        return tell(AcquireEvent::done(now_));
      case Kind::wait:
      case Kind::backoff:
        return wait(a, p, s.arg);
      case Kind::await_replicas:
        if (p % 3 == 1) return tell(AcquireEvent::failed(true, now_, s.arg % 2 == 0));
        return tell(AcquireEvent::replicas(
            p % 3 == 2 ? params_.min_replicas - 1 : params_.min_replicas, now_));
      case Kind::grant:
        return grant(a, p, s.arg);
      case Kind::leave:
        return leave(a, p, s.arg);
      case Kind::leave_later:
        check_leave_ticket(a);
        reap();
        // Retried in the background until `until`, when the entry has expired anyway.
        if (entry_ && (a.ticket == 0 || a.ticket == entry_->ticket)) {
          RC_ASSERT(a.until && *a.until >= entry_->expires);
          entry_.reset();
        }
        return tell(AcquireEvent::done(now_));
      case Kind::finish:
        ++finishes_;
        outcome_ = a.outcome;
        // A permit made but not delivered is dropped by the driver: its release frees it.
        if (permit_ && outcome_ != AcquireOutcome::granted) remove(*permit_);
        return tell(AcquireEvent::done(now_));
      default:
        RC_FAIL("an action with no answer");
    }
  }

  AcquireAction call(const AcquireAction& a, int p, int arg) {
    switch (p % 8) {
      case 0:  // no connection could be had: nothing reached the server
        return tell(AcquireEvent::failed(false, now_, arg % 2 == 0));
      case 1:  // the server ran it, and the reply was lost to an outage
        run_call(a, arg);
        return tell(AcquireEvent::failed(true, now_, true));
      case 2:  // lost on the way: it may have reached the server, and did not
        return tell(AcquireEvent::failed(true, now_, true));
      case 3:  // the server ran it, then an error that does not pass
        run_call(a, arg);
        return tell(AcquireEvent::failed(true, now_, false));
      case 4:
        return kept_wake_up(a, arg);
      default: {
        const AcquireReply r = run_call(a, arg);
        if (r.ticket != 0) known_.insert(r.ticket);
        return tell(AcquireEvent::replied(r, now_, now_));
      }
    }
  }

  /// A wake-up while a call (or the listening after it) is out: kept, nothing asked for; the
  /// action is still to be done.
  AcquireAction kept_wake_up(const AcquireAction& a, int arg) {
    RC_ASSERT(tell(AcquireEvent::woken(wake_up(arg), now_)).kind == Kind::none);
    return a;
  }

  AcquireAction wait(const AcquireAction& a, int p, int arg) {
    check_until(a);
    RC_ASSERT(a.until.has_value());
    switch (p < 0 ? 0 : p % 8) {
      case 0:  // the timer, on time
        now_ = std::max(now_, *a.until);
        return tell(AcquireEvent::tick(now_));
      case 1:  // a timer of an earlier wait, or one that fired early
        return tell(AcquireEvent::tick(now_));
      case 2:
      case 3:
        return tell(AcquireEvent::woken(wake_up(arg), now_));
      case 4:
        return tell(AcquireEvent::woken(removal(arg), now_));
      case 5:
        return tell(AcquireEvent::interrupted(now_));
      case 6:
        return tell(AcquireEvent::refused("LOADING", arg % 2 == 0, now_));
      default:  // a wake-up that could not be read
        return tell(AcquireEvent::failed(true, now_, false));
    }
  }

  AcquireAction grant(const AcquireAction& a, int p, int arg) {
    reap();
    // The permit is the entry the server promoted, and is still there.
    RC_ASSERT(entry_.has_value());
    RC_ASSERT(entry_->granted);
    RC_ASSERT(entry_->ticket == a.reply.ticket);
    if (p % 4 == 1) return tell(AcquireEvent::failed(true, now_, arg % 2 == 0));
    permit_ = a.reply.ticket;
    return tell(AcquireEvent::done(now_));
  }

  AcquireAction leave(const AcquireAction& a, int p, int arg) {
    check_leave_ticket(a);
    switch (p % 4) {
      case 1:  // the server went away: the release may have run, its reply lost
        if (arg % 2 == 0) remove(a.ticket);
        return tell(AcquireEvent::failed(true, now_, true));
      case 2:  // refused (an ACL, say): the entry is left to its lease, as the driver says
        abandoned_ = true;
        return tell(AcquireEvent::failed(true, now_, false));
      default:
        remove(a.ticket);
        return tell(AcquireEvent::done(now_));
    }
  }

  // --- The entry in Redis ---------------------------------------------------------------------

  /// The acquire script's run for the id: it answers where the entry stands (renewing it),
  /// queues it (again) when it has none, grants it when `arg` says the units are free, and a
  /// poll may find the waiter evicted or too large.
  AcquireReply run_call(const AcquireAction& a, int arg) {
    reap();
    AcquireReply r;
    const bool free = arg % 2 == 0;
    if (a.kind == Kind::poll && entry_ && !entry_->granted && arg % 8 >= 6) {
      entry_.reset();
      r.state = arg % 8 == 6 ? AcquireState::evicted : AcquireState::too_large;
      return r;
    }
    // A poll that finds its entry removed on purpose is told by the marker left for it; a
    // first call queues anew and clears it.
    if (a.kind == Kind::poll && !entry_ && marker_) {
      r.state = *marker_ == WakeReason::evicted ? AcquireState::evicted : AcquireState::too_large;
      marker_.reset();
      return r;
    }
    if (a.kind != Kind::poll) marker_.reset();
    if (!entry_) {
      if (a.kind == Kind::send_try && !free) return r;  // full: nothing written
      entry_ = Entry{next_ticket_++, free || a.kind == Kind::send_try, now_};
    } else if (free) {
      entry_->granted = true;
    }
    if (entry_->granted) promoted_.push_back(entry_->ticket);
    entry_->expires = now_ + kLease;
    r.state = entry_->granted ? AcquireState::granted : AcquireState::queued;
    r.ticket = entry_->ticket;
    r.lease = kLease;
    if (entry_->granted) r.slots = slots();
    r.position = entry_->granted ? 0 : 1;
    return r;
  }

  /// A promotion wake-up: the entry promoted now (when `arg` says so), or one that came
  /// before (a duplicate), or an earlier entry's.
  WakeUp wake_up(int arg) {
    reap();
    if (entry_ && !entry_->granted && arg % 2 == 0) {
      entry_->granted = true;
      promoted_.push_back(entry_->ticket);
    }
    WakeUp w;
    w.reason = WakeReason::promoted;
    w.slots = slots();
    w.ticket = promoted_.empty() || arg % 4 == 3 ? kStaleTicket : promoted_.back();
    return w;
  }

  /// An eviction or a resize that removes the waiting entry; a stale wake-up if none waits.
  WakeUp removal(int arg) {
    reap();
    if (!entry_ || entry_->granted) return wake_up(3);
    entry_.reset();
    WakeUp w;
    w.reason = arg % 2 == 0 ? WakeReason::evicted : WakeReason::too_large;
    marker_ = w.reason;
    return w;
  }

  std::vector<long long> slots() const {
    std::vector<long long> s;
    for (long long i = 0; i < params_.units; ++i) s.push_back(i);
    return s;
  }

  /// The release script's: the id's entry goes if `ticket` is 0 or names it.
  void remove(long long ticket) {
    reap();
    if (entry_ && (ticket == 0 || ticket == entry_->ticket)) entry_.reset();
  }

  /// The server reaps an entry no call renewed for a lease.
  void reap() {
    if (entry_ && now_ >= entry_->expires) entry_.reset();
  }

  // --- The contract ---------------------------------------------------------------------------

  void check_until(const AcquireAction& a) const {
    if (a.until && params_.deadline && !AcquireFsmPeer::tries(fsm_)) {
      RC_ASSERT(*a.until <= *params_.deadline);
    }
  }

  void check_leave_ticket(const AcquireAction& a) const {
    // Ticket 0 removes whatever entry the id has: a caller-chosen id may be another handle's.
    if (params_.chosen_id) RC_ASSERT(a.ticket != 0);
  }

  void check_end() {
    RC_ASSERT(finishes_ == 1);  // the callback, exactly once
    if (cancel_told_) RC_ASSERT(outcome_ == AcquireOutcome::cancelled);
    reap();
    if (outcome_ == AcquireOutcome::granted) {
      RC_ASSERT(entry_.has_value());
      RC_ASSERT(permit_ == entry_->ticket);
      return;
    }
    if (!entry_ || abandoned_) return;
    // A caller-chosen id: an entry whose ticket the machine never learned may be another
    // handle's, and so may a grant (the permit that id holds already) to a try or one that
    // too few replicas acknowledged.
    if (params_.chosen_id &&
        (AcquireFsmPeer::tries(fsm_) || too_few_replicas_ || known_.count(entry_->ticket) == 0)) {
      return;
    }
    RC_FAIL("the request ended without its permit and left its entry (ticket " +
            std::to_string(entry_->ticket) + (entry_->granted ? ", holding" : ", waiting") +
            ") in Redis");
  }

  const AcquireParams params_;
  AcquireFsm fsm_;
  Clock::time_point now_ = kStart;
  bool calm_ = false;
  std::optional<Entry> entry_;
  std::optional<WakeReason> marker_;  // the entry was removed on purpose: evicted or too large
  long long next_ticket_ = 100;
  std::vector<long long> promoted_;  // the tickets of this id's entries promoted so far
  std::set<long long> known_;        // the tickets the machine was told in a reply
  std::optional<long long> permit_;  // a grant action done: the permit made (its ticket)
  bool abandoned_ = false;           // a leave failed in a way that does not pass
  bool too_few_replicas_ = false;    // the grant was found acknowledged by too few replicas
  bool cancel_told_ = false;
  int finishes_ = 0;
  AcquireOutcome outcome_ = AcquireOutcome::failed;
};

rc::Gen<Step> steps_of_the_world() {
  return rc::gen::build<Step>(rc::gen::set(&Step::pick, rc::gen::inRange(0, kPicks)),
                              rc::gen::set(&Step::arg, rc::gen::inRange(0, 8)),
                              rc::gen::set(&Step::dt, rc::gen::inRange(0, 2500)));
}

/// The request: `shape` picks a try, a wait with no deadline, or one of `deadline_ms`.
AcquireParams request(int shape, int deadline_ms, bool chosen_id, int min_replicas, int units) {
  AcquireParams p;
  p.units = units;
  p.wait = shape != 0;
  if (shape == 2) p.deadline = kStart + ms(deadline_ms);
  p.started = kStart;
  p.poll_interval = kPoll;
  p.direct_grant_margin = ms(6000);
  p.min_replicas = min_replicas;
  p.chosen_id = chosen_id;
  p.lease = kLease;
  p.jitter_seed = static_cast<std::uint64_t>(deadline_ms);
  return p;
}

RC_GTEST_PROP(AcquireFsmProperty, KeepsItsContractWhateverHappens, ()) {
  const int shape = *rc::gen::inRange(0, 3);
  const int deadline_ms = *rc::gen::inRange(0, 8000);
  const bool chosen_id = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
  const int min_replicas = *rc::gen::weightedElement<int>({{3, 0}, {1, 1}});
  const int units = *rc::gen::inRange(1, 3);
  const std::vector<Step> steps = *rc::gen::container<std::vector<Step>>(steps_of_the_world());
  World(request(shape, deadline_ms, chosen_id, min_replicas, units)).run(steps);
}

}  // namespace acquire_fsm_property
}  // namespace fairsem::detail
