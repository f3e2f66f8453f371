// AcquireFsm (tests/support/acquire_fsm_fixture.hpp): a grant at once or by a wake-up, polls,
// removals by reply and by wake-up, a cut-off or refused BRPOP, and a wake-up that arrives
// before the poll's reply. The other acquire_fsm_*_test.cpp: the first call and errors,
// cancels, outages, lost replies.

#include "acquire_fsm_fixture.hpp"

namespace fairsem::detail::acquire_fsm_test {

TEST_F(AcquireFsmTest, GrantedAtOnce) {
  make(queue_params());
  const AcquireAction turn = start();
  EXPECT_EQ(turn.kind, Kind::wait_turn);
  EXPECT_FALSE(turn.until);  // no deadline: in line for as long as it takes
  EXPECT_EQ(admitted().kind, Kind::send_queue);
  now += 5ms;
  const AcquireAction grant = feed(Event::replied(granted(kTicket, {2}), kT0, now));
  ASSERT_EQ(grant.kind, Kind::grant);
  EXPECT_EQ(grant.reply.ticket, kTicket);
  EXPECT_EQ(grant.reply.slots, std::vector<long long>{2});
  EXPECT_EQ(grant.sent, kT0);  // the lease counts from when the call left
  expect_finish(done(), AcquireOutcome::granted);
}

TEST_F(AcquireFsmTest, QueuedThenWokenIsGrantedDirectly) {
  const AcquireAction wait = queue_up();
  ASSERT_EQ(wait.kind, Kind::wait);
  EXPECT_EQ(wait.until, kT0 + kPoll);
  now += 300ms;
  const AcquireAction grant = wake(promoted(kTicket, {3}));
  ASSERT_EQ(grant.kind, Kind::grant);  // no poll: the wake-up is the grant
  EXPECT_EQ(grant.reply.slots, std::vector<long long>{3});
  EXPECT_EQ(grant.reply.ticket, kTicket);
  EXPECT_EQ(grant.sent, kT0);  // the lease the queueing call set
  expect_finish(done(), AcquireOutcome::granted);
}

TEST_F(AcquireFsmTest, WokenWithTooLittleLeaseLeftPolls) {
  queue_up();
  // 10 s lease sent at kT0: at kT0 + 4.5 s, 5.5 s are left, under the 6 s margin.
  now = kT0 + 4500ms;
  const AcquireAction poll = wake(promoted());
  ASSERT_EQ(poll.kind, Kind::poll);
  EXPECT_EQ(poll.ticket, kTicket);
  // The poll's fresh lease makes it a grant.
  const AcquireAction grant = reply(granted());
  ASSERT_EQ(grant.kind, Kind::grant);
  EXPECT_EQ(grant.sent, now);
}

TEST_F(AcquireFsmTest, WokenWithJustEnoughLeaseLeftIsGrantedDirectly) {
  queue_up();
  now = kT0 + 3900ms;  // 6.1 s left
  EXPECT_EQ(wake(promoted()).kind, Kind::grant);
}

TEST_F(AcquireFsmTest, WokenForAnotherTicketPolls) {
  queue_up();
  now += 10ms;
  const AcquireAction poll = wake(promoted(kTicket - 1));  // an earlier entry's
  ASSERT_EQ(poll.kind, Kind::poll);
  EXPECT_EQ(poll.ticket, kTicket);
}

TEST_F(AcquireFsmTest, WokenWithAnotherSlotCountPolls) {
  AcquireParams p = queue_params();
  p.units = 2;
  queue_up(p);
  now += 10ms;
  EXPECT_EQ(wake(promoted(kTicket, {1})).kind, Kind::poll);
}

TEST_F(AcquireFsmTest, WokenWithTheRightSlotCountOfSeveralIsGranted) {
  AcquireParams p = queue_params();
  p.units = 2;
  queue_up(p);
  now += 10ms;
  const AcquireAction grant = wake(promoted(kTicket, {1, 4}));
  ASSERT_EQ(grant.kind, Kind::grant);
  EXPECT_EQ(grant.reply.slots, (std::vector<long long>{1, 4}));
}

TEST_F(AcquireFsmTest, PollFindsGranted) {
  queue_up();
  now = kT0 + kPoll;  // no wake-up came: the timer
  const AcquireAction poll = tick();
  ASSERT_EQ(poll.kind, Kind::poll);
  EXPECT_EQ(poll.ticket, kTicket);
  const Clock::time_point sent = now;
  now += 3ms;
  const AcquireAction grant = feed(Event::replied(granted(kTicket, {1}), sent, now));
  ASSERT_EQ(grant.kind, Kind::grant);
  EXPECT_EQ(grant.sent, sent);
  EXPECT_EQ(grant.reply.slots, std::vector<long long>{1});
  expect_finish(done(), AcquireOutcome::granted);
}

TEST_F(AcquireFsmTest, PollFindsStillQueuedRearmsAndWaits) {
  queue_up();
  now = kT0 + 400ms;
  EXPECT_EQ(tick().kind, Kind::wait);  // a stale timer: not due yet
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  EXPECT_EQ(reply(queued()).kind, Kind::rearm);
  now += 2ms;
  const AcquireAction wait = done();
  ASSERT_EQ(wait.kind, Kind::wait);
  EXPECT_EQ(wait.until, now + kPoll);  // the next poll counts from this one
  EXPECT_FALSE(fsm->over());
}

TEST_F(AcquireFsmTest, EvictedByReplyEndsWithoutLeaving) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  expect_finish(reply(in_state(AcquireState::evicted)), AcquireOutcome::evicted);
}

TEST_F(AcquireFsmTest, EvictedByWakeUpEndsWithoutLeaving) {
  queue_up();
  now += 10ms;
  expect_finish(wake(woken(WakeReason::evicted, 0, {})), AcquireOutcome::evicted);
}

TEST_F(AcquireFsmTest, TooLargeByReplyEndsWithoutLeaving) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  expect_finish(reply(in_state(AcquireState::too_large)), AcquireOutcome::too_large);
}

TEST_F(AcquireFsmTest, TooLargeByWakeUpEndsWithoutLeaving) {
  queue_up();
  now += 10ms;
  expect_finish(wake(woken(WakeReason::too_large, 0, {})), AcquireOutcome::too_large);
}

TEST_F(AcquireFsmTest, AnInterruptedWakePollsNow) {
  queue_up();
  now += 10ms;  // long before the poll is due
  const AcquireAction poll = feed(Event::interrupted(now));
  ASSERT_EQ(poll.kind, Kind::poll);
  EXPECT_EQ(poll.ticket, kTicket);
}

TEST_F(AcquireFsmTest, ATransientRefusalPollsNow) {
  queue_up();
  now += 10ms;
  EXPECT_EQ(feed(Event::refused("LOADING", true, now)).kind, Kind::poll);
}

TEST_F(AcquireFsmTest, ARefusalIsReportedOnceAWaitAndTheWaitGoesOn) {
  queue_up();
  now += 10ms;
  const AcquireAction report = feed(Event::refused("NOPERM brpop", false, now));
  ASSERT_EQ(report.kind, Kind::report);
  EXPECT_EQ(report.error, "NOPERM brpop");
  const AcquireAction wait = done();
  ASSERT_EQ(wait.kind, Kind::wait);
  EXPECT_EQ(wait.until, kT0 + kPoll);  // the same wait, not a poll
  now += 10ms;
  EXPECT_EQ(feed(Event::refused("NOPERM brpop", false, now)).kind, Kind::wait);  // not again
  // A wake-up can still come after a refusal.
  EXPECT_EQ(wake(promoted()).kind, Kind::grant);
}

TEST_F(AcquireFsmTest, ARefusalIsReportedAgainInTheWaitAfterAPoll) {
  queue_up();
  now += 10ms;
  ASSERT_EQ(feed(Event::refused("NOPERM", false, now)).kind, Kind::report);
  ASSERT_EQ(done().kind, Kind::wait);
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  ASSERT_EQ(reply(queued()).kind, Kind::rearm);
  ASSERT_EQ(done().kind, Kind::wait);
  now += 10ms;
  EXPECT_EQ(feed(Event::refused("NOPERM", false, now)).kind, Kind::report);
}

TEST_F(AcquireFsmTest, MinReplicasAwaitsReplicasAndNeverGrantsDirectlyFromAWakeUp) {
  AcquireParams p = queue_params();
  p.min_replicas = 1;
  queue_up(p);
  now += 10ms;  // a fresh lease: without min_replicas this would be the grant
  ASSERT_EQ(wake(promoted()).kind, Kind::poll);
  ASSERT_EQ(reply(granted()).kind, Kind::await_replicas);
  const AcquireAction grant = feed(Event::replicas(1, now));
  ASSERT_EQ(grant.kind, Kind::grant);
  expect_finish(done(), AcquireOutcome::granted);
}

// --- A wake-up that arrives before the poll's reply -------------------------------------------

TEST_F(AcquireFsmTest, AWakeUpBeforeAStillQueuedPollReplyIsNotLost) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  const Clock::time_point sent = now;
  // Promoted just after the poll ran: its wake-up overtakes the poll's reply.
  now += 1ms;
  EXPECT_EQ(wake(promoted(kTicket, {5})).kind, Kind::none);  // kept until the reply
  now += 1ms;
  ASSERT_EQ(feed(Event::replied(queued(), sent, now)).kind, Kind::rearm);
  const AcquireAction grant = done();
  ASSERT_EQ(grant.kind, Kind::grant);  // not a wait until the next poll
  EXPECT_EQ(grant.reply.slots, std::vector<long long>{5});
  EXPECT_EQ(grant.sent, sent);
  expect_finish(done(), AcquireOutcome::granted);
}

TEST_F(AcquireFsmTest, AWakeUpBeforeAGrantedPollReplyGrantsOnce) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  EXPECT_EQ(wake(promoted()).kind, Kind::none);
  ASSERT_EQ(reply(granted()).kind, Kind::grant);
  ASSERT_EQ(done().kind, Kind::finish);
  EXPECT_EQ(done().kind, Kind::none);
  EXPECT_TRUE(fsm->over());
  EXPECT_EQ(wake(promoted()).kind, Kind::none);  // a copy of it, later: nothing more
}

TEST_F(AcquireFsmTest, AnOldWakeUpBeforeAPollThatRequeuedPolls) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  EXPECT_EQ(wake(promoted(kTicket)).kind, Kind::none);
  // The entry had expired: the poll queued it again with a new ticket.
  ASSERT_EQ(reply(queued(kTicket + 5)).kind, Kind::rearm);
  const AcquireAction poll = done();
  ASSERT_EQ(poll.kind, Kind::poll);  // the old entry's wake-up grants nothing
  EXPECT_EQ(poll.ticket, kTicket + 5);
}

TEST_F(AcquireFsmTest, AWakeUpBeforeThePollsReplyIsNoGrantAfterAnEviction) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  EXPECT_EQ(wake(promoted()).kind, Kind::none);
  expect_finish(reply(in_state(AcquireState::evicted)), AcquireOutcome::evicted);
}

TEST_F(AcquireFsmTest, AWakeUpBeforeTheSubscriptionIsMadeIsNotLost) {
  make(queue_params());
  start();
  admitted();
  ASSERT_EQ(reply(queued()).kind, Kind::subscribe);
  EXPECT_EQ(wake(promoted()).kind, Kind::none);
  EXPECT_EQ(done().kind, Kind::grant);
}

TEST_F(AcquireFsmTest, StrayEventsChangeNothing) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  // While the poll is out: a timer, a cut-off BRPOP, another start or turn.
  EXPECT_EQ(tick().kind, Kind::none);
  EXPECT_EQ(feed(Event::interrupted(now)).kind, Kind::none);
  EXPECT_EQ(start().kind, Kind::none);
  EXPECT_EQ(admitted().kind, Kind::none);
  EXPECT_EQ(feed(Event::replicas(3, now)).kind, Kind::none);
  EXPECT_EQ(reply(granted()).kind, Kind::grant);
}

}  // namespace fairsem::detail::acquire_fsm_test
