// AcquireFsm (tests/support/acquire_fsm_fixture.hpp): the first call (a try, a deadline passed
// before it could leave, FRESH) and what an error leaves behind (the first call's with a random
// or a caller-chosen id, a try's, too few replicas).

#include "acquire_fsm_fixture.hpp"

namespace fairsem::detail::acquire_fsm_test {

TEST_F(AcquireFsmTest, ADeadlinePassedInLineEndsWithNothingToLeave) {
  AcquireParams p = queue_params();
  p.deadline = kT0 + 50ms;
  make(p);
  const AcquireAction turn = start();
  ASSERT_EQ(turn.kind, Kind::wait_turn);
  EXPECT_EQ(turn.until, kT0 + 50ms);
  now += 50ms;
  expect_finish(tick(), AcquireOutcome::timed_out);
  EXPECT_EQ(admitted().kind, Kind::none);  // the turn came too late: nothing is sent
}

TEST_F(AcquireFsmTest, DeadlineAlreadyPassedAtStartTries) {
  AcquireParams p = queue_params();
  p.deadline = kT0 - 1ms;
  make(p);
  EXPECT_TRUE(AcquireFsmPeer::tries(*fsm));
  const AcquireAction turn = start();
  ASSERT_EQ(turn.kind, Kind::wait_turn);
  EXPECT_FALSE(turn.until);  // a try waits for its turn however long
  now += 1s;
  EXPECT_EQ(admitted().kind, Kind::send_try);
  expect_finish(reply(in_state(AcquireState::full)), AcquireOutcome::rejected);
}

TEST_F(AcquireFsmTest, TryRejected) {
  AcquireParams p = queue_params();
  p.wait = false;
  make(p);
  EXPECT_TRUE(AcquireFsmPeer::tries(*fsm));
  start();
  EXPECT_EQ(admitted().kind, Kind::send_try);
  expect_finish(reply(in_state(AcquireState::full)), AcquireOutcome::rejected);
}

TEST_F(AcquireFsmTest, TryGranted) {
  AcquireParams p = queue_params();
  p.wait = false;
  make(p);
  start();
  admitted();
  EXPECT_EQ(reply(granted()).kind, Kind::grant);
  expect_finish(done(), AcquireOutcome::granted);
}

// FRESH lets the script skip the lookups only an id used before needs (acquire.lua): only the
// first call of a random id may say so. The call sent again after one that reached the server
// may find the entry that one made.
TEST_F(AcquireFsmTest, OnlyTheFirstCallOfARandomIdIsFresh) {
  make(queue_params());
  ASSERT_EQ(start().kind, Kind::wait_turn);
  const AcquireAction first = admitted();
  ASSERT_EQ(first.kind, Kind::send_queue);
  EXPECT_TRUE(first.fresh);
  const AcquireAction backoff = failed_passing();
  ASSERT_EQ(backoff.kind, Kind::backoff);
  now = *backoff.until;
  const AcquireAction again = tick();
  ASSERT_EQ(again.kind, Kind::send_queue);
  EXPECT_FALSE(again.fresh);

  AcquireParams tries = queue_params();
  tries.wait = false;
  make(tries);
  start();
  const AcquireAction one_try = admitted();
  ASSERT_EQ(one_try.kind, Kind::send_try);
  EXPECT_TRUE(one_try.fresh);

  AcquireParams chosen = queue_params();
  chosen.chosen_id = true;
  make(chosen);
  start();
  const AcquireAction with_chosen_id = admitted();
  ASSERT_EQ(with_chosen_id.kind, Kind::send_queue);
  EXPECT_FALSE(with_chosen_id.fresh);
}

TEST_F(AcquireFsmTest, AFirstCallThatFailsWithARandomIdLeavesWhateverEntryItMadeIt) {
  make(queue_params());
  start();
  admitted();
  // The call may have queued before its reply was lost: ticket 0 names any entry of the id.
  expect_leave_then_finish(failed(), AcquireOutcome::failed, 0);
}

TEST_F(AcquireFsmTest, AFirstCallThatFailsWithACallerChosenIdLeavesNothing) {
  AcquireParams p = queue_params();
  p.chosen_id = true;
  make(p);
  start();
  admitted();
  expect_finish(failed(), AcquireOutcome::failed);
}

TEST_F(AcquireFsmTest, AFirstCallThatNeverLeftLeavesNothing) {
  make(queue_params());
  start();
  admitted();
  expect_finish(failed(/*reached=*/false), AcquireOutcome::failed);
}

TEST_F(AcquireFsmTest, AnErrorAfterQueueingLeavesTheTicketEvenWithACallerChosenId) {
  AcquireParams p = queue_params();
  p.chosen_id = true;
  queue_up(p);
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  expect_leave_then_finish(failed(), AcquireOutcome::failed);
}

TEST_F(AcquireFsmTest, AWakeUpThatCannotBeReadEndsInAnErrorAndLeaves) {
  queue_up();
  now += 10ms;
  expect_leave_then_finish(failed(), AcquireOutcome::failed);
}

TEST_F(AcquireFsmTest, ATryThatFailsLeavesOnlyARandomId) {
  AcquireParams p = queue_params();
  p.wait = false;
  make(p);
  start();
  admitted();
  ASSERT_EQ(reply(granted()).kind, Kind::grant);
  expect_leave_then_finish(failed(), AcquireOutcome::failed);  // the permit could not be made

  p.chosen_id = true;
  make(p);
  start();
  admitted();
  ASSERT_EQ(reply(granted()).kind, Kind::grant);
  expect_finish(failed(), AcquireOutcome::failed);
}

TEST_F(AcquireFsmTest, TooFewReplicasGiveARandomIdBack) {
  AcquireParams p = queue_params();
  p.min_replicas = 2;
  make(p);
  start();
  admitted();
  ASSERT_EQ(reply(granted()).kind, Kind::await_replicas);
  expect_leave_then_finish(feed(Event::replicas(1, now)), AcquireOutcome::replication);
}

TEST_F(AcquireFsmTest, TooFewReplicasLeaveACallerChosenIdToItsLease) {
  AcquireParams p = queue_params();
  p.min_replicas = 2;
  p.chosen_id = true;
  make(p);
  start();
  admitted();
  ASSERT_EQ(reply(granted()).kind, Kind::await_replicas);
  expect_finish(feed(Event::replicas(0, now)), AcquireOutcome::replication);
}

// Issue 50, defects 5 and 6: a timed request's calls carry its deadline, which the driver's
// wait for a connection and connecting must not outlast; a first call that could not leave by
// then is a time-out, with nothing to leave. Before it, it is the error it was.
TEST_F(AcquireFsmTest, AFirstCallThatFindsNoConnectionByTheDeadlineTimesOut) {
  AcquireParams p = queue_params();
  p.deadline = kT0 + 300ms;
  make(p);
  start();
  const AcquireAction first = admitted();
  ASSERT_EQ(first.kind, Kind::send_queue);
  EXPECT_EQ(first.until, p.deadline);
  now = *p.deadline;
  expect_finish(failed_passing(/*reached=*/false), AcquireOutcome::timed_out);

  now = kT0;
  make(p);
  start();
  admitted();
  now = kT0 + 100ms;  // refused before the deadline: the server is down
  expect_finish(failed_passing(/*reached=*/false), AcquireOutcome::failed);
}

TEST_F(AcquireFsmTest, PollsCarryTheDeadlineAndATryNone) {
  AcquireParams p = queue_params();
  p.deadline = kT0 + 5s;
  queue_up(p);
  now = kT0 + kPoll;
  const AcquireAction poll = tick();
  ASSERT_EQ(poll.kind, Kind::poll);
  EXPECT_EQ(poll.until, p.deadline);

  p.wait = false;
  make(p);
  start();
  const AcquireAction one_try = admitted();
  ASSERT_EQ(one_try.kind, Kind::send_try);
  EXPECT_FALSE(one_try.until);
}

TEST_F(AcquireFsmTest, AFirstCallThatNeverReachedTheServerLeavesNothing) {
  make(queue_params());
  start();
  admitted();
  expect_finish(failed_passing(false), AcquireOutcome::failed);
}

TEST_F(AcquireFsmTest, ATryIsNeverRetried) {
  AcquireParams p = queue_params();
  p.wait = false;
  make(p);
  start();
  ASSERT_EQ(admitted().kind, Kind::send_try);
  const AcquireAction later = failed_passing();
  ASSERT_EQ(later.kind, Kind::leave_later);
  expect_finish(done(), AcquireOutcome::failed);
}

}  // namespace fairsem::detail::acquire_fsm_test
