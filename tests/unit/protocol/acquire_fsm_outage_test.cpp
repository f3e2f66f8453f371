// AcquireFsm (tests/support/acquire_fsm_fixture.hpp): riding out an outage: a poll (or the
// listening after it) that fails in a way that passes is retried after a backoff, until the
// deadline; a leave the server cannot take goes on in the background.

#include "acquire_fsm_fixture.hpp"

namespace fairsem::detail::acquire_fsm_test {

namespace {

// Expects a backoff of [first / 2, first] from `from`, never past `deadline`.
void expect_backoff(const AcquireAction& action, Clock::time_point from,
                    std::chrono::milliseconds first,
                    std::optional<Clock::time_point> deadline = std::nullopt) {
  ASSERT_EQ(action.kind, Kind::backoff);
  ASSERT_TRUE(action.until);
  if (deadline && *action.until == *deadline) return;
  EXPECT_GE(*action.until, from + first / 2);
  EXPECT_LE(*action.until, from + first);
}

}  // namespace

TEST_F(AcquireFsmTest, APollThatFailsInAWayThatPassesIsRetriedAfterABackoff) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  now += 2s;  // the poll's own reconnects took this long
  const AcquireAction backoff = failed_passing();
  expect_backoff(backoff, now, 50ms);
  // Early timers and the waker's trouble do not poll before the backoff is over.
  EXPECT_EQ(tick().until, backoff.until);
  EXPECT_EQ(feed(Event::interrupted(now)).until, backoff.until);
  EXPECT_EQ(feed(Event::refused("LOADING Redis is loading", true, now)).kind, Kind::backoff);
  now = *backoff.until;
  const AcquireAction poll = tick();
  ASSERT_EQ(poll.kind, Kind::poll);
  EXPECT_EQ(poll.ticket, kTicket);  // the entry is kept: same ticket
  // The server is back: listening again, the next poll an interval away.
  ASSERT_EQ(reply(queued()).kind, Kind::rearm);
  const AcquireAction wait = done();
  ASSERT_EQ(wait.kind, Kind::wait);
  EXPECT_EQ(wait.until, now + kPoll);
}

TEST_F(AcquireFsmTest, TheBackoffDoublesUpToItsCapAndStartsAgainAfterASuccess) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  auto first = 50ms;
  for (int i = 0; i < 8; ++i) {
    const AcquireAction backoff = failed_passing();
    expect_backoff(backoff, now, first);
    now = *backoff.until;
    ASSERT_EQ(tick().kind, Kind::poll);
    first = std::min(first * 2, std::chrono::milliseconds(1000));
  }
  EXPECT_EQ(first, 1000ms);  // capped
  ASSERT_EQ(reply(queued()).kind, Kind::rearm);
  const AcquireAction wait = done();
  ASSERT_EQ(wait.kind, Kind::wait);
  now = *wait.until;
  ASSERT_EQ(tick().kind, Kind::poll);
  expect_backoff(failed_passing(), now, 50ms);  // from the first pause again
}

TEST_F(AcquireFsmTest, WithNoDeadlineAWaiterRetriesForAsLongAsItTakes) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  for (int i = 0; i < 200; ++i) {  // over three minutes of an unreachable server
    const AcquireAction backoff = failed_passing();
    ASSERT_EQ(backoff.kind, Kind::backoff);
    now = *backoff.until;
    ASSERT_EQ(tick().kind, Kind::poll);
  }
  EXPECT_GT(now, kT0 + 100s);
  EXPECT_EQ(reply(granted()).kind, Kind::grant);
  expect_finish(done(), AcquireOutcome::granted);
}

TEST_F(AcquireFsmTest, AFailureThatDoesNotPassStillEndsAtOnce) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  // The poll may have run, its reply lost: if it found the entry gone, it queued the id again
  // under a ticket not known here, so whatever entry the id has is left (ticket 0).
  expect_leave_then_finish(failed(), AcquireOutcome::failed, 0);
}

TEST_F(AcquireFsmTest, ARearmThatFailsInAWayThatPassesIsRetriedToo) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  ASSERT_EQ(reply(queued()).kind, Kind::rearm);
  const AcquireAction backoff = failed_passing();
  expect_backoff(backoff, now, 50ms);
  now = *backoff.until;
  EXPECT_EQ(tick().kind, Kind::poll);
}

// The server went away between the queue call and the first listening (seen once: the last of
// 20 waiters failed with "reconnecting gave up" when the server was killed right after it had
// queued): the entry is there, so the waiter retries as after a poll.
TEST_F(AcquireFsmTest, AFirstSubscribeThatFailsInAWayThatPassesIsRetried) {
  make(queue_params());
  ASSERT_EQ(start().kind, Kind::wait_turn);
  ASSERT_EQ(admitted().kind, Kind::send_queue);
  ASSERT_EQ(reply(queued()).kind, Kind::subscribe);
  const AcquireAction backoff = failed_passing();
  expect_backoff(backoff, now, 50ms);
  now = *backoff.until;
  EXPECT_EQ(tick().kind, Kind::poll);
}

TEST_F(AcquireFsmTest, RetryingEndsAtTheDeadlineAndLeavesInTheBackground) {
  AcquireParams p = queue_params();
  p.deadline = kT0 + 3s;
  queue_up(p);
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  Clock::time_point last_failure;
  for (;;) {
    now += 700ms;  // each poll fails after its reconnects
    last_failure = now;
    const AcquireAction a = failed_passing();
    if (a.kind != Kind::backoff) {
      // The deadline passed while the poll was out: given up now, the leave handed on.
      ASSERT_EQ(a.kind, Kind::leave_later);
      EXPECT_EQ(a.ticket, 0);                     // the failed polls may have queued the id again
      EXPECT_EQ(a.until, last_failure + kLease);  // the entry expires on its own by then
      expect_finish(done(), AcquireOutcome::timed_out);
      break;
    }
    EXPECT_LE(*a.until, *p.deadline);  // a backoff never waits past the deadline
    now = *a.until;
    const AcquireAction next = tick();
    if (next.kind != Kind::poll) {
      ASSERT_EQ(next.kind, Kind::leave_later);
      EXPECT_EQ(now, *p.deadline);
      EXPECT_EQ(next.until, last_failure + kLease);
      expect_finish(done(), AcquireOutcome::timed_out);
      break;
    }
  }
  EXPECT_TRUE(fsm->over());
}

TEST_F(AcquireFsmTest, TheDeadlineDuringABackoffEndsItWithoutAnotherCall) {
  AcquireParams p = queue_params();
  p.deadline = kT0 + kPoll + 30ms;
  queue_up(p);
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  const AcquireAction backoff = failed_passing();
  ASSERT_EQ(backoff.kind, Kind::backoff);
  EXPECT_LE(*backoff.until, *p.deadline);
  now = *p.deadline;
  const AcquireAction leave = tick();
  ASSERT_EQ(leave.kind, Kind::leave_later);
  EXPECT_EQ(leave.until, kT0 + kPoll + kLease);
  expect_finish(done(), AcquireOutcome::timed_out);
}

TEST_F(AcquireFsmTest, ALeaveThatFailsInAWayThatPassesGoesToTheBackground) {
  AcquireParams p = queue_params();
  p.deadline = kT0 + 500ms;
  queue_up(p);
  now = *p.deadline;
  const AcquireAction leave = tick();
  ASSERT_EQ(leave.kind, Kind::leave);  // the server answered last: left at once
  now += 300ms;
  const AcquireAction later = failed_passing();
  ASSERT_EQ(later.kind, Kind::leave_later);
  EXPECT_EQ(later.ticket, kTicket);
  EXPECT_EQ(later.until, kT0 + kLease);  // a lease after the last call that reached it
  expect_finish(done(), AcquireOutcome::timed_out);
}

TEST_F(AcquireFsmTest, ALeaveThatFailsOtherwiseLeavesTheEntryToItsLease) {
  AcquireParams p = queue_params();
  p.deadline = kT0 + 500ms;
  queue_up(p);
  now = *p.deadline;
  ASSERT_EQ(tick().kind, Kind::leave);
  expect_finish(failed(), AcquireOutcome::timed_out);
}

TEST_F(AcquireFsmTest, ACancelWhileRetryingEndsAtOnceAndLeavesInTheBackground) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  ASSERT_EQ(failed_passing().kind, Kind::backoff);
  now += 10ms;
  const AcquireAction finish = cancel();
  ASSERT_EQ(finish.kind, Kind::finish);  // no call first: the server is away
  EXPECT_EQ(finish.outcome, AcquireOutcome::cancelled);
  const AcquireAction later = done();
  ASSERT_EQ(later.kind, Kind::leave_later);
  EXPECT_EQ(later.ticket, 0);  // the failed poll may have queued the id again
  EXPECT_EQ(later.until, kT0 + kPoll + kLease);
  EXPECT_EQ(done().kind, Kind::none);
  EXPECT_TRUE(fsm->over());
}

TEST_F(AcquireFsmTest, NoLeaveIsHandedOnOnceTheEntryHasSurelyExpired) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  // No connection could be had for a lease: no call reached the server since kT0 + kPoll.
  now += kLease;
  ASSERT_EQ(failed_passing(false).kind, Kind::backoff);
  now += 10ms;
  // Reaped by the server before anyone could promote it: nothing to leave.
  expect_finish(cancel(), AcquireOutcome::cancelled);
}

TEST_F(AcquireFsmTest, AWakeUpWhileRetryingSaysTheServerIsBack) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  ASSERT_EQ(failed_passing().kind, Kind::backoff);
  now += 10ms;
  // Promoted (the server came back and the holder left): granted, with lease enough left.
  const AcquireAction grant = wake(promoted(kTicket, {1}));
  ASSERT_EQ(grant.kind, Kind::grant);
  EXPECT_EQ(grant.reply.slots, std::vector<long long>{1});
  expect_finish(done(), AcquireOutcome::granted);
}

}  // namespace fairsem::detail::acquire_fsm_test
