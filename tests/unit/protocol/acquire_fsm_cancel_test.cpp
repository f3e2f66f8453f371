// AcquireFsm (tests/support/acquire_fsm_fixture.hpp): giving up while queued: a deadline that
// passes, and cancels at every stage, the races with a promotion included.

#include "acquire_fsm_fixture.hpp"

namespace fairsem::detail::acquire_fsm_test {

TEST_F(AcquireFsmTest, DeadlinePassesWhileQueuedLeavesAndTimesOut) {
  AcquireParams p = queue_params();
  p.deadline = kT0 + 1500ms;
  const AcquireAction first = queue_up(p);
  EXPECT_EQ(first.until, kT0 + kPoll);  // the poll comes before the deadline
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  ASSERT_EQ(reply(queued()).kind, Kind::rearm);
  const AcquireAction wait = done();
  ASSERT_EQ(wait.kind, Kind::wait);
  EXPECT_EQ(wait.until, kT0 + 1500ms);  // the deadline before the next poll
  now = kT0 + 1500ms;
  expect_leave_then_finish(tick(), AcquireOutcome::timed_out);
}

// --- Cancels ----------------------------------------------------------------------------------

TEST_F(AcquireFsmTest, ACancelInLineSendsNothingAndLeavesNothing) {
  make(queue_params());
  start();
  expect_finish(cancel(), AcquireOutcome::cancelled);
  EXPECT_EQ(admitted().kind, Kind::none);
}

TEST_F(AcquireFsmTest, ACancelWhileQueuedFinishesFirstThenLeaves) {
  queue_up();
  now += 10ms;
  expect_cancelled_then_leave(cancel());
}

TEST_F(AcquireFsmTest, ACancelAtTheInstantOfPromotionGivesThePromotionBack) {
  // The promoted wake-up arrived and asked for the grant; the cancel comes before it is made.
  queue_up();
  now += 10ms;
  ASSERT_EQ(wake(promoted()).kind, Kind::grant);
  expect_cancelled_then_leave(cancel());
}

TEST_F(AcquireFsmTest, ACancelBeforeAPromotionIsReadGivesItBackAndIgnoresTheWakeUp) {
  queue_up();
  now += 10ms;
  const AcquireAction finish = cancel();  // the wake-up waits unread in the subscription
  ASSERT_EQ(finish.kind, Kind::finish);
  EXPECT_EQ(wake(promoted()).kind, Kind::none);  // told meanwhile: not a grant any more
  const AcquireAction leave = done();
  ASSERT_EQ(leave.kind, Kind::leave);  // the leave passes the promotion on
  EXPECT_EQ(leave.ticket, kTicket);
  EXPECT_EQ(done().kind, Kind::none);
}

TEST_F(AcquireFsmTest, ACancelRacingAPollReplyThatSaysGrantedGivesThePermitBack) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  ASSERT_EQ(reply(granted()).kind, Kind::grant);
  expect_cancelled_then_leave(cancel());
}

TEST_F(AcquireFsmTest, ACancelRacingAGrantWaitingForReplicasGivesItBack) {
  AcquireParams p = queue_params();
  p.min_replicas = 1;
  queue_up(p);
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  ASSERT_EQ(reply(granted()).kind, Kind::await_replicas);
  expect_cancelled_then_leave(cancel());
}

TEST_F(AcquireFsmTest, ACancelInPlaceOfAPollLeaves) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  expect_cancelled_then_leave(cancel());  // the poll was never sent
}

TEST_F(AcquireFsmTest, ACancelAfterThePermitWasMadeWinsAndLeavesTheReleaseToTheDriver) {
  queue_up();
  now += 10ms;
  ASSERT_EQ(wake(promoted()).kind, Kind::grant);
  ASSERT_EQ(done().kind, Kind::finish);  // the permit is made; its delivery is cancelled
  // The driver drops the permit it made (its release gives the units back): no leave.
  expect_finish(cancel(), AcquireOutcome::cancelled);
}

TEST_F(AcquireFsmTest, ACancelWhileATimedOutRequestLeavesStillLeaves) {
  AcquireParams p = queue_params();
  p.deadline = kT0 + 500ms;
  queue_up(p);
  now = kT0 + 500ms;
  ASSERT_EQ(tick().kind, Kind::leave);
  expect_cancelled_then_leave(cancel());  // the leave dropped for the cancel comes after
}

// cancel() returned true, so the caller is promised a CancelledError: an eviction decided an
// instant before, not delivered yet, is not reported.
TEST_F(AcquireFsmTest, ACancelBeforeTheOutcomeIsDeliveredWinsOverAnEviction) {
  queue_up();
  now += 10ms;
  ASSERT_EQ(wake(woken(WakeReason::evicted, 0, {})).kind, Kind::finish);
  expect_finish(cancel(), AcquireOutcome::cancelled);
}

TEST_F(AcquireFsmTest, ACancelIsHeardOnce) {
  queue_up();
  ASSERT_EQ(cancel().kind, Kind::finish);
  EXPECT_EQ(cancel().kind, Kind::none);
}

}  // namespace fairsem::detail::acquire_fsm_test
