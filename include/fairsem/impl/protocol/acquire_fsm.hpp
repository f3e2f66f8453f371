#pragma once

// One acquire's protocol, and nothing else: a state machine told what happened (an event) and
// answering what to do next (an action), with no I/O, no threads and no clock of its own (time
// comes in with each event). Every decision of an acquire is here: try or queue, when to poll,
// when a wake-up is the grant, when to give up, what to leave behind after an error or a
// cancel. The blocking acquire (semaphore_core_acquire-inl.hpp) and AsyncAcquire
// (async_acquire-inl.hpp) both drive it, one doing the I/O on the calling thread, the other a step
// at a time on the Client's executor; the unit tests drive it with no server at all
// (tests/unit/protocol/acquire_fsm_*test.cpp). Internal. Defined in two files, one per facet:
// acquire_fsm-inl.hpp and acquire_fsm_end-inl.hpp (how an acquire ends).
//
// A driver starts with resume(start), then performs each action and resumes with what came of
// it, until the action is `none` with the machine over():
//   - wait_turn, wait, backoff: suspend until `until` (none: no limit); resume with what came
//     meanwhile (admitted; woken, interrupted, refused) or, if nothing did, with tick;
//   - send_try, send_queue, poll: one acquire call; resume with replied or failed;
//   - await_replicas: WAIT on the connection the granting call ran on; replicas or failed;
//   - subscribe, rearm, grant, leave: done or failed; leave_later, report, finish: done (they
//     cannot fail).
// A failure says whether it passes (retry_backoff.hpp: the server restarting, loading, failing
// over, a broken connection). A queued waiter whose poll fails that way keeps its entry and polls
// again after a backoff, until its deadline; a waiter whose first call reached the server and
// then failed that way (it may have queued, its reply lost) sends it again, with the same id,
// the same way; any other failure ends the acquire at once. A
// request that gives up while the server is unreachable hands its leave to the background
// (leave_later), bounded by when its entry expires on its own.
// A driver that cannot do what it was asked for otherwise (read a wake-up, arm a timer) says
// failed, and the machine cleans up as after any error.
// `cancelled` may come at any time, and in place of performing the action last asked for
// (which is then dropped, not performed): a cancel that comes while an action runs is told
// after it, as that action's follow-up is asked for. Events that do not fit the stage (a stale
// timer, a wake-up while a call is out) are kept or ignored: resume never fails.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "fairsem/impl/protocol/replies.hpp"
#include "fairsem/impl/protocol/retry_backoff.hpp"

namespace fairsem::detail {

/// What one acquire asks for, fixed when it starts.
struct AcquireParams {
  using Clock = std::chrono::steady_clock;

  long long units = 1;
  /// False for try_acquire: one call, never queued.
  bool wait = true;
  /// When a waiting acquire gives up (none: never). One already passed when the request was
  /// made leaves no time to wait: it tries, as try_acquire does, and never queues.
  std::optional<Clock::time_point> deadline;
  /// When the request was made.
  Clock::time_point started;
  /// How long a waiter that hears nothing waits before it polls.
  std::chrono::milliseconds poll_interval{1000};
  /// A wake-up is taken as the grant, with no further call, only while more than this is left
  /// of the lease the waiter's last call set.
  std::chrono::milliseconds direct_grant_margin{0};
  /// Replicas that must acknowledge a grant (SemaphoreOptions::min_replicas).
  long long min_replicas = 0;
  /// The permit id is the caller's (SemaphoreOptions::permit_id), not a random one: it may name
  /// another handle's entry, which this acquire must not remove.
  bool chosen_id = false;
  /// The semaphore's lease: an entry no call renewed for this long is reaped (never promoted)
  /// by the server, which bounds a leave handed to the background.
  std::chrono::milliseconds lease{10000};
  /// Seeds the jitter of the retries' backoff (RetryBackoff).
  std::uint64_t jitter_seed = 0;
  /// The first pause and the cap of the retries' backoff.
  std::chrono::milliseconds retry_first = RetryBackoff::kFirst;
  std::chrono::milliseconds retry_cap = RetryBackoff::kCap;
};

/// What happened, for AcquireFsm::resume. Every event carries the time it is told at.
struct AcquireEvent {
  using Clock = std::chrono::steady_clock;

  enum class Kind {
    start,        // the request was made
    admitted,     // its turn in the admission line came: it may send its first call
    replied,      // the call asked for (send_try, send_queue, poll) was answered: reply, sent
    failed,       // the action asked for failed (or a wake-up could not be read): reached
    woken,        // a wake-up came for the request's id: wake
    interrupted,  // the waker's BRPOP was cut off: a wake-up it popped may be lost
    refused,      // the waker's BRPOP was refused: error, transient
    replicas,     // WAIT answered: acked
    done,         // the action asked for (subscribe, rearm, grant, leave, report, finish) is done
    tick,         // time passed: a timer, or a wait that ended with nothing
    cancelled     // the caller cancelled the request
  };

  // Each at time `at`.
  static AcquireEvent start(Clock::time_point at);
  static AcquireEvent admitted(Clock::time_point at);
  /// `sent_at`: when the call left, which the lease it reports is counted from.
  static AcquireEvent replied(AcquireReply answer, Clock::time_point sent_at, Clock::time_point at);
  /// `may_have_reached`: the call may have reached the server (false only when the first call
  /// surely did nothing: no connection could be had for it, or the script refused it before
  /// writing, as with QueueFullError). `passing`: the failure
  /// passes with time (passes(), retry_backoff.hpp): the server is believed unreachable.
  static AcquireEvent failed(bool may_have_reached, Clock::time_point at, bool passing = false);
  static AcquireEvent woken(WakeUp wake_up, Clock::time_point at);
  static AcquireEvent interrupted(Clock::time_point at);
  /// `passes`: is_transient(message), a refusal that passes (the server is loading, say).
  static AcquireEvent refused(std::string message, bool passes, Clock::time_point at);
  static AcquireEvent replicas(long long count, Clock::time_point at);
  static AcquireEvent done(Clock::time_point at);
  static AcquireEvent tick(Clock::time_point at);
  static AcquireEvent cancelled(Clock::time_point at);

  Kind kind = Kind::tick;
  Clock::time_point now;
  AcquireReply reply;      // replied
  Clock::time_point sent;  // replied
  bool reached = true;     // failed
  WakeUp wake;             // woken
  std::string error;       // refused
  bool transient = false;  // refused, failed
  long long acked = 0;     // replicas
};

/// How an acquire ends.
enum class AcquireOutcome {
  granted,      // the permit the last grant action made
  rejected,     // a try found no room: no permit, and no error
  timed_out,    // the deadline passed (in line or queued): no permit, and no error
  cancelled,    // the caller cancelled first
  evicted,      // the queued request was evicted (EvictedError)
  too_large,    // a resize left the request asking for more than the limit (RequestTooLargeError)
  replication,  // too few replicas acknowledged the grant (ReplicationError)
  failed        // an action failed: the driver's error is the outcome
};

/// What to do next.
struct AcquireAction {
  using Clock = std::chrono::steady_clock;

  enum class Kind {
    none,            // nothing now: over(), or waiting for the result of what runs
    wait_turn,       // wait for the admission turn until `until`
    send_try,        // the first call, mode try: never queues
    send_queue,      // the first call, mode queue
    subscribe,       // listen for wake-ups (on the first call's connection)
    wait,            // wait for a wake-up until `until`: the next poll or the deadline
    poll,            // the acquire call again, with `ticket`
    rearm,           // listen again after a poll (on the poll's connection)
    await_replicas,  // WAIT on the connection whose call granted
    grant,           // make the permit from `reply`, counted from `sent`
    leave,           // give the entry of `ticket` up (0: whatever entry the id has)
    report,          // log the waker's refused BRPOP, `error`
    finish,          // complete the request with `outcome`
    backoff,         // a poll failed in a way that passes: wait until `until`, then poll again
    leave_later      // the server is unreachable: leave the entry of `ticket` in the background,
                     // retrying until `until` (past which the server reaps it unpromoted)
  };

  Kind kind = Kind::none;
  // wait_turn, wait, backoff, leave_later; send_queue, poll: the deadline, which the
  // connection for the call (the pool's wait, connecting) must not outlast.
  std::optional<Clock::time_point> until;
  long long ticket = 0;  // poll, leave, leave_later
  // send_try, send_queue: the id's first call (a random id, never sent before).
  bool fresh = false;
  AcquireReply reply;                               // grant
  Clock::time_point sent;                           // grant
  std::string error;                                // report
  AcquireOutcome outcome = AcquireOutcome::failed;  // finish

  /// An action of `k`, every other field as above.
  static AcquireAction of(Kind k) {
    AcquireAction a;
    a.kind = k;
    return a;
  }
};

class AcquireFsm {
 public:
  using Clock = std::chrono::steady_clock;

  explicit AcquireFsm(const AcquireParams& params);

  /// Tells the machine what happened; returns what to do next.
  AcquireAction resume(const AcquireEvent& event);

  /// True once nothing is left to do (the request finished, and left the queue if it had to).
  bool over() const noexcept { return in<Over>(); }

 private:
  friend struct AcquireFsmPeer;  // what the unit tests read (tests/support/acquire_fsm_peer.hpp)

  // The stages, each with what holds only in it.
  struct Idle {};         // not started
  struct InLine {};       // waiting for its admission turn
  struct Calling {};      // the first call is out
  struct Subscribing {};  // queued: the subscription is being made
  struct Waiting {        // queued and listening: for a wake-up, the next poll or the deadline
    Clock::time_point next_poll;
    bool reported = false;  // a refused BRPOP was reported in this wait (said once a wait)
  };
  struct Reporting {  // a refused BRPOP is being logged; then the same wait goes on
    Clock::time_point next_poll;
  };
  struct Polling {};  // a poll is out
  struct Retrying {   // a call failed in a way that passes: waiting to send it again
    Clock::time_point retry_at;
  };
  struct Rearming {};     // the poll found the request still queued: listening again
  struct Replicating {};  // granted: WAIT is out
  struct Granting {};     // the permit is being made
  struct Leaving {        // the entry is being given up
    bool later = false;   // in the background (leave_later): the server is unreachable
    // The outcome delivered after it; none: delivered already (a cancel's leave comes after).
    std::optional<AcquireOutcome> then_finish;
  };
  struct Finishing {  // the outcome is being delivered
    AcquireOutcome outcome = AcquireOutcome::failed;
    bool then_leave = false;  // cancelled: the entry is given up after the callback
  };
  struct Over {};
  using Stage = std::variant<Idle, InLine, Calling, Subscribing, Waiting, Reporting, Polling,
                             Retrying, Rearming, Replicating, Granting, Leaving, Finishing, Over>;

  /// What the server may hold for this request's id, as far as the machine knows.
  enum class Entry {
    none,        // no call may have reached it: nothing to leave
    unanswered,  // the first call may have reached it, its reply lost: an entry with no ticket
    known,       // the entry the last reply named (reply_.ticket)
    unsure       // that one, or one a poll since queued anew (the entry was gone), its reply lost
  };

  template <typename... S>
  bool in() const noexcept {
    return (std::holds_alternative<S>(stage_) || ...);
  }
  /// The first call was sent (it may have queued even if it failed).
  bool sent_first() const noexcept { return entry_ != Entry::none; }
  /// A reply came: the request has a ticket (and, queued, a subscription).
  bool answered() const noexcept { return entry_ == Entry::known || entry_ == Entry::unsure; }
  /// An acquire call since the last reply may have run unanswered.
  bool lost_reply() const noexcept {
    return entry_ == Entry::unanswered || entry_ == Entry::unsure;
  }

  AcquireAction on_start(Clock::time_point now);
  AcquireAction on_admitted(Clock::time_point now);
  AcquireAction on_replied(const AcquireEvent& event);
  AcquireAction on_failed(const AcquireEvent& event);
  AcquireAction on_woken(const AcquireEvent& event);
  AcquireAction on_trouble(const AcquireEvent& event);
  AcquireAction on_replicas(long long acked);
  AcquireAction on_done(Clock::time_point now);
  AcquireAction on_tick(Clock::time_point now);
  AcquireAction on_cancelled();

  /// In line: the turn, until the deadline (a try waits for it without one).
  AcquireAction in_line(Clock::time_point now);
  /// A reply of mode queue (the first call's, or a poll's).
  AcquireAction queue_reply(bool first);
  /// Listening (again) in `wait` (after subscribe, rearm or a report): a wake-up kept
  /// meanwhile first.
  AcquireAction listen(Clock::time_point now, Waiting wait);
  /// A wake-up for this request's id, while it listens.
  AcquireAction wake_up(const WakeUp& wake, Clock::time_point now);
  /// Waiting on (the stage is Waiting): the deadline ends it; the poll comes when due.
  AcquireAction wait_on(Clock::time_point now);
  /// A poll now, unless the deadline has passed, which ends the wait.
  AcquireAction poll_now(Clock::time_point now);
  /// An acquire call of `kind` (send_queue or poll), bounded by the deadline.
  AcquireAction call(AcquireAction::Kind kind) const;
  /// A poll (or the rearm after it) failed in a way that passes: poll again after a backoff.
  AcquireAction retry(Clock::time_point now);
  /// Retrying (the stage is Retrying): the deadline ends it; the next call comes when due.
  AcquireAction retry_step(Clock::time_point now);
  /// Granted (by a reply, or by a wake-up): WAIT first with min_replicas, then the permit.
  AcquireAction granted();
  AcquireAction grant();
  /// Ends with `outcome`, leaving the queue first when `leave_first`.
  AcquireAction end(AcquireOutcome outcome, bool leave_first);
  /// Delivers `outcome`, giving the entry up after it when `then_leave`.
  AcquireAction finish(AcquireOutcome outcome, bool then_leave = false);
  /// Leaves the queue, then delivers `then_finish` (if not delivered yet): at once, or in the
  /// background while the server is unreachable (nothing, when the entry has surely expired
  /// by now).
  AcquireAction leave(std::optional<AcquireOutcome> then_finish);
  /// After leaving (or handing the leave on): `then_finish`, or over.
  AcquireAction left(std::optional<AcquireOutcome> then_finish);
  /// Ending without its permit (an error, a cancel, a give-up): whether this request may, and
  /// must, give its entry up: one a reply named, or one a call that may have reached the
  /// server made (its reply lost), when the id is surely this request's own.
  bool must_leave() const noexcept;
  /// A cancel was heard: it is being delivered, or the entry is being given up after it.
  bool cancel_heard() const noexcept;
  bool past_deadline(Clock::time_point now) const noexcept;

  const AcquireParams params_;
  const bool tries_;  // try_acquire, or a deadline passed when the request was made
  Stage stage_;
  Clock::time_point now_;  // the time of the event being told
  Entry entry_ = Entry::none;
  // The last call failed in a way that passes (the server is believed unreachable): giving up
  // hands the leave to the background rather than wait for it. A fact about the server, not
  // the stage: a reply clears it, and it holds on through retrying, its calls, a grant by a
  // wake-up and the leave.
  bool unreachable_ = false;
  // When the entry expires on the server, at the latest, if no call renews it: a lease after
  // the last call that may have reached it.
  Clock::time_point entry_expiry_;
  RetryBackoff backoff_;
  AcquireReply reply_;  // the last reply
  Clock::time_point sent_;
  // A wake-up that came while a call was out (Calling, Subscribing, Polling, Rearming,
  // Reporting, or Retrying with no reply yet): read once the call is answered (listen()).
  std::optional<WakeUp> kept_wake_;
};

}  // namespace fairsem::detail
