// AcquireFsm (tests/support/acquire_fsm_fixture.hpp): replies lost: a first call whose reply is
// lost in a way that passes is sent again with the same id; a poll that queued the id anew is
// followed; what a cancel or a deadline then leaves, and a wake-up kept meanwhile.

#include "acquire_fsm_fixture.hpp"

namespace fairsem::detail::acquire_fsm_test {

TEST_F(AcquireFsmTest, AWaiterWhoseEntryWasLostQueuesAgainWithItsNewTicket) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  const AcquireAction backoff = failed_passing();
  now = *backoff.until;
  ASSERT_EQ(tick().kind, Kind::poll);
  // Restarted without persistence: the poll found no entry and queued the request again, under
  // a later ticket (a new counter starts above every earlier one: docs/guarantees.md).
  constexpr long long kRequeued = kTicket + 3;
  ASSERT_EQ(reply(queued(kRequeued)).kind, Kind::rearm);
  ASSERT_EQ(done().kind, Kind::wait);
  now += 10ms;
  const AcquireAction poll = wake(promoted(kTicket));  // the lost entry's ticket: not a grant
  ASSERT_EQ(poll.kind, Kind::poll);
  EXPECT_EQ(poll.ticket, kRequeued);
  ASSERT_EQ(reply(queued(kRequeued)).kind, Kind::rearm);
  ASSERT_EQ(done().kind, Kind::wait);
  EXPECT_EQ(wake(promoted(kRequeued)).kind, Kind::grant);
}

// A semaphore with tenants gives a promoted waiter a new ticket, drawn after its own (tenants.lua):
// a wake-up with a later ticket is this entry's grant, and that ticket is the permit's fencing
// token.
TEST_F(AcquireFsmTest, AWakeUpUnderALaterTicketGrantsWithThatTicket) {
  queue_up();
  now += 10ms;
  const AcquireAction grant = wake(promoted(kTicket + 40));
  ASSERT_EQ(grant.kind, Kind::grant);
  EXPECT_EQ(grant.reply.ticket, kTicket + 40);
}

// The server went away just after the first call reached it: the call may have queued, its
// reply lost. The waiter rides the outage out as a queued one does: the same call again, with
// the same id, after a backoff, until the server answers where its entry stands.
TEST_F(AcquireFsmTest, AFirstCallWhoseReplyIsLostInAWayThatPassesIsSentAgain) {
  make(queue_params());
  start();
  admitted();
  now += 2s;
  const AcquireAction backoff = failed_passing();
  ASSERT_EQ(backoff.kind, Kind::backoff);
  ASSERT_TRUE(backoff.until.has_value());
  // A wake-up meanwhile cannot be matched to a ticket yet: kept, not acted on; the backoff
  // goes on.
  const AcquireAction still = wake(promoted());
  EXPECT_EQ(still.kind, Kind::backoff);
  EXPECT_EQ(still.until, backoff.until);
  now = *backoff.until;
  // Not reached this time (connection refused): still possibly queued, so still retried.
  ASSERT_EQ(tick().kind, Kind::send_queue);
  const AcquireAction again = failed_passing(false);
  ASSERT_EQ(again.kind, Kind::backoff);
  now = *again.until;
  ASSERT_EQ(tick().kind, Kind::send_queue);
  // The server is back: it listens as any waiter does, and the kept wake-up is for this
  // ticket, so the grant is taken.
  ASSERT_EQ(reply(queued()).kind, Kind::subscribe);
  EXPECT_EQ(done().kind, Kind::grant);
}

TEST_F(AcquireFsmTest, AFirstCallRetriedPastTheDeadlineGivesUpAndLeavesInTheBackground) {
  AcquireParams p = queue_params();
  p.deadline = kT0 + 3s;
  make(p);
  start();
  admitted();
  now += 2s;
  const AcquireAction backoff = failed_passing();
  ASSERT_EQ(backoff.kind, Kind::backoff);
  now = *p.deadline;
  // Whatever entry the lost call made is left in the background, by when it expires.
  const AcquireAction later = tick();
  ASSERT_EQ(later.kind, Kind::leave_later);
  EXPECT_EQ(later.ticket, 0);
  EXPECT_EQ(later.until, kT0 + 2s + kLease);
  expect_finish(done(), AcquireOutcome::timed_out);
}

// Issue 50, defect 4: the first call ran on the server (granted at once, or queued) and its
// reply was lost to an outage; a cancel while it is being sent again gives up whatever entry
// the id has (ticket 0), in the background while the server is away, until it would expire.
TEST_F(AcquireFsmTest, ACancelAfterALostFirstReplyLeavesWhateverEntryTheIdHas) {
  make(queue_params());
  start();
  admitted();
  now += 100ms;
  ASSERT_EQ(failed_passing().kind, Kind::backoff);
  now += 400ms;
  const AcquireAction finish = cancel();
  ASSERT_EQ(finish.kind, Kind::finish);  // at once: the server is away
  EXPECT_EQ(finish.outcome, AcquireOutcome::cancelled);
  const AcquireAction later = done();
  ASSERT_EQ(later.kind, Kind::leave_later);
  EXPECT_EQ(later.ticket, 0);
  EXPECT_EQ(later.until, kT0 + 100ms + kLease);
  EXPECT_EQ(done().kind, Kind::none);
  EXPECT_TRUE(fsm->over());
}

TEST_F(AcquireFsmTest, ACancelInPlaceOfTheFirstCallSentAgainLeavesToo) {
  make(queue_params());
  start();
  admitted();
  const AcquireAction backoff = failed_passing();
  ASSERT_EQ(backoff.kind, Kind::backoff);
  now = *backoff.until;
  ASSERT_EQ(tick().kind, Kind::send_queue);
  ASSERT_EQ(cancel().kind, Kind::finish);  // the call sent again is dropped
  const AcquireAction later = done();
  ASSERT_EQ(later.kind, Kind::leave_later);
  EXPECT_EQ(later.ticket, 0);
}

// A caller-chosen id may name another handle's entry: without a ticket, nothing is left by it.
TEST_F(AcquireFsmTest, ACallerChosenIdWithoutATicketIsNeverLeftByACancelOrADeadline) {
  AcquireParams p = queue_params();
  p.chosen_id = true;
  make(p);
  start();
  admitted();
  ASSERT_EQ(failed_passing().kind, Kind::backoff);
  expect_finish(cancel(), AcquireOutcome::cancelled);

  p.deadline = kT0 + 1s;
  make(p);
  start();
  admitted();
  ASSERT_EQ(failed_passing().kind, Kind::backoff);
  now = *p.deadline;
  expect_finish(tick(), AcquireOutcome::timed_out);
}

// Found by the property test: the lost first call queued, that entry was evicted, and the
// call sent again queued anew; the eviction's wake-up, popped before the request listened and
// kept for it, is not taken for the new entry's: a poll says where that one stands.
TEST_F(AcquireFsmTest, AKeptEvictionIsConfirmedByAPollBeforeItEndsTheRequest) {
  make(queue_params());
  start();
  admitted();
  const AcquireAction backoff = failed_passing();
  ASSERT_EQ(backoff.kind, Kind::backoff);
  EXPECT_EQ(wake(woken(WakeReason::evicted, 0, {})).kind, Kind::backoff);  // kept
  now = *backoff.until;
  ASSERT_EQ(tick().kind, Kind::send_queue);
  ASSERT_EQ(reply(queued(kTicket + 1)).kind, Kind::subscribe);
  const AcquireAction poll = done();
  ASSERT_EQ(poll.kind, Kind::poll);  // not the end of the request, its new entry left queued
  EXPECT_EQ(poll.ticket, kTicket + 1);
  ASSERT_EQ(reply(queued(kTicket + 1)).kind, Kind::rearm);
  EXPECT_EQ(done().kind, Kind::wait);
}

}  // namespace fairsem::detail::acquire_fsm_test
