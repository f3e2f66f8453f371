#pragma once

// One acquire's protocol, and nothing else: a state machine told what happened (an event) and
// answering what to do next (an action), with no I/O, no threads and no clock of its own (time
// comes in with each event). Every decision of an acquire is here: try or queue, when to poll,
// when a wake-up is the grant, when to give up, what to leave behind after an error or a
// cancel. The blocking acquire (semaphore_core_acquire-inl.hpp) and AsyncAcquire
// (async_acquire-inl.hpp) both drive it, one doing the I/O on the calling thread, the other a step
// at a time on the Client's executor; the unit tests drive it with no server at all
// (tests/unit/acquire_fsm_test.cpp). Internal.
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

  /// True when the request only tries: try_acquire, or a deadline passed when it was made.
  bool tries() const noexcept { return tries_; }
  /// True once nothing is left to do (the request finished, and left the queue if it had to).
  bool over() const noexcept { return stage_ == Stage::over; }

 private:
  enum class Stage {
    idle,         // not started
    in_line,      // waiting for its admission turn
    calling,      // the first call is out
    subscribing,  // queued: the subscription is being made
    waiting,      // queued and listening: for a wake-up, the next poll or the deadline
    polling,      // a poll is out
    retrying,     // a poll failed in a way that passes: waiting to poll again
    rearming,     // the poll found the request still queued: listening again
    replicating,  // granted: WAIT is out
    granting,     // the permit is being made
    reporting,    // a refused BRPOP is being logged
    leaving,      // the entry is being given up
    finishing,    // the outcome is being delivered
    over
  };

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
  /// Listening again (after subscribe, rearm or a report): a wake-up kept meanwhile first.
  AcquireAction listen(Clock::time_point now);
  /// A wake-up for this request's id, while it listens.
  AcquireAction wake_up(const WakeUp& wake, Clock::time_point now);
  /// Waiting on: the deadline ends it; a poll comes now (`poll_now`) or when due.
  AcquireAction next_step(Clock::time_point now, bool poll_now);
  /// An acquire call of `kind` (send_queue or poll), bounded by the deadline.
  AcquireAction call(AcquireAction::Kind kind) const;
  /// A poll (or the rearm after it) failed in a way that passes: poll again after a backoff.
  AcquireAction retry(Clock::time_point now);
  /// Retrying: the deadline ends it; the next poll comes when due.
  AcquireAction retry_step(Clock::time_point now);
  /// Granted (by a reply, or by a wake-up): WAIT first with min_replicas, then the permit.
  AcquireAction granted();
  AcquireAction grant();
  /// Ends with `outcome`, leaving the queue first when `leave_first`.
  AcquireAction end(AcquireOutcome outcome, bool leave_first);
  AcquireAction finish(AcquireOutcome outcome);
  /// Leaves the queue: at once, or in the background while the server is unreachable (nothing,
  /// when the entry has surely expired by now).
  AcquireAction leave();
  /// After leaving (or handing the leave on): the outcome, or over.
  AcquireAction left();
  /// Ending without its permit (an error, a cancel, a give-up): whether this request may, and
  /// must, give its entry up: one a reply named, or one a call that may have reached the
  /// server made (its reply lost), when the id is surely this request's own.
  bool must_leave() const noexcept;
  bool past_deadline(Clock::time_point now) const noexcept;

  const AcquireParams params_;
  const bool tries_;
  Stage stage_ = Stage::idle;
  Clock::time_point now_;  // the time of the event being told
  RetryBackoff backoff_;
  Clock::time_point retry_at_;
  // The last call failed in a way that passes (the server is believed unreachable): giving up
  // hands the leave to the background rather than wait for it.
  bool unreachable_ = false;
  // When the entry expires on the server, at the latest, if no call renews it: a lease after
  // the last call that may have reached it.
  Clock::time_point entry_expiry_;
  bool left_later_ = false;  // the leave was handed to the background
  bool sent_first_ = false;  // the first call was sent (it may have queued even if it failed)
  bool answered_ = false;    // a reply came: the request has a ticket (and a subscription)
  bool lost_reply_ = false;  // an acquire call since the last reply may have run unanswered
  AcquireReply reply_;
  Clock::time_point sent_;
  Clock::time_point next_poll_ = Clock::time_point::max();
  bool reported_ = false;                            // a refused BRPOP was reported in this wait
  std::optional<WakeUp> kept_wake_;                  // a wake-up that came while a call was out
  AcquireOutcome outcome_ = AcquireOutcome::failed;  // what finish delivers (after leaving)
  bool finished_ = false;                            // the finish action was done
  bool leave_after_finish_ = false;  // cancelled: the entry is given up after the callback
  bool cancel_heard_ = false;
};

}  // namespace fairsem::detail
