// AcquireFsm, with no server: one acquire's protocol fed replies, wake-ups, time-outs, cancels
// and errors, with its actions checked one by one. Time is made up (no clock is read), so the
// races the drivers can only meet by chance are spelled out here: a cancel at the instant of
// promotion, a wake-up that arrives before the poll's reply.

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <ostream>
#include <vector>

#include "acquire_fsm_names.hpp"
#include "fairsem/impl/protocol/acquire_fsm.hpp"

namespace fairsem::detail {

// GoogleTest prints what it compares; names read better than numbers.
void PrintTo(AcquireAction::Kind kind, std::ostream* os) { *os << test::name_of(kind); }

void PrintTo(AcquireOutcome outcome, std::ostream* os) { *os << test::name_of(outcome); }

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Kind = AcquireAction::Kind;
using Event = AcquireEvent;

const Clock::time_point kT0{std::chrono::hours(1)};
constexpr long long kTicket = 7;
constexpr auto kLease = 10s;
constexpr auto kPoll = 1000ms;
constexpr auto kMargin = 6000ms;

AcquireParams queue_params() {
  AcquireParams p;
  p.units = 1;
  p.wait = true;
  p.started = kT0;
  p.poll_interval = kPoll;
  p.direct_grant_margin = kMargin;
  p.lease = kLease;
  p.jitter_seed = 42;
  return p;
}

AcquireReply queued(long long ticket = kTicket) {
  AcquireReply r;
  r.state = AcquireState::queued;
  r.ticket = ticket;
  r.lease = kLease;
  r.position = 1;
  return r;
}

AcquireReply granted(long long ticket = kTicket, std::vector<long long> slots = {0}) {
  AcquireReply r;
  r.state = AcquireState::granted;
  r.ticket = ticket;
  r.lease = kLease;
  r.slots = std::move(slots);
  return r;
}

AcquireReply in_state(AcquireState state) {
  AcquireReply r;
  r.state = state;
  return r;
}

WakeUp woken(WakeReason reason, long long ticket = kTicket, std::vector<long long> slots = {0}) {
  WakeUp w;
  w.reason = reason;
  w.ticket = ticket;
  w.slots = std::move(slots);
  return w;
}

WakeUp promoted(long long ticket = kTicket, std::vector<long long> slots = {0}) {
  return woken(WakeReason::promoted, ticket, std::move(slots));
}

// One acquire and the time its events are told at.
class AcquireFsmTest : public ::testing::Test {
 protected:
  void make(const AcquireParams& params) { fsm.emplace(params); }

  AcquireAction feed(const AcquireEvent& event) { return fsm->resume(event); }
  AcquireAction start() { return feed(Event::start(now)); }
  AcquireAction admitted() { return feed(Event::admitted(now)); }
  AcquireAction reply(const AcquireReply& r) { return feed(Event::replied(r, now, now)); }
  AcquireAction failed(bool reached = true) { return feed(Event::failed(reached, now)); }
  // A failure that passes (the server restarting, loading, failing over).
  AcquireAction failed_passing(bool reached = true) {
    return feed(Event::failed(reached, now, true));
  }
  AcquireAction wake(const WakeUp& w) { return feed(Event::woken(w, now)); }
  AcquireAction done() { return feed(Event::done(now)); }
  AcquireAction tick() { return feed(Event::tick(now)); }
  AcquireAction cancel() { return feed(Event::cancelled(now)); }

  // A queue request made with `params`, answered queued with kTicket at kT0 and listening:
  // the action is the first wait.
  AcquireAction queue_up(const AcquireParams& params = queue_params()) {
    make(params);
    EXPECT_EQ(start().kind, Kind::wait_turn);
    EXPECT_EQ(admitted().kind, Kind::send_queue);
    EXPECT_EQ(reply(queued()).kind, Kind::subscribe);
    return done();
  }

  // Expects the action to finish with `outcome`, and the machine to be over after it.
  void expect_finish(const AcquireAction& action, AcquireOutcome outcome) {
    ASSERT_EQ(action.kind, Kind::finish);
    EXPECT_EQ(action.outcome, outcome);
    EXPECT_EQ(done().kind, Kind::none);
    EXPECT_TRUE(fsm->over());
  }

  // Expects the action to give kTicket's entry up, then to finish with `outcome`.
  void expect_leave_then_finish(const AcquireAction& action, AcquireOutcome outcome,
                                long long ticket = kTicket) {
    ASSERT_EQ(action.kind, Kind::leave);
    EXPECT_EQ(action.ticket, ticket);
    expect_finish(done(), outcome);
  }

  // Expects a cancelled outcome now, then kTicket's entry given up, then nothing.
  void expect_cancelled_then_leave(const AcquireAction& action) {
    ASSERT_EQ(action.kind, Kind::finish);
    EXPECT_EQ(action.outcome, AcquireOutcome::cancelled);
    const AcquireAction after = done();
    ASSERT_EQ(after.kind, Kind::leave);
    EXPECT_EQ(after.ticket, kTicket);
    EXPECT_EQ(done().kind, Kind::none);
    EXPECT_TRUE(fsm->over());
  }

  std::optional<AcquireFsm> fsm;
  Clock::time_point now = kT0;
};

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
  EXPECT_TRUE(fsm->tries());
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
  EXPECT_TRUE(fsm->tries());
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

// --- Riding out an outage: a poll that fails in a way that passes is retried ------------------

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

TEST_F(AcquireFsmTest, AWaiterWhoseEntryWasLostQueuesAgainWithItsNewTicket) {
  queue_up();
  now = kT0 + kPoll;
  ASSERT_EQ(tick().kind, Kind::poll);
  const AcquireAction backoff = failed_passing();
  now = *backoff.until;
  ASSERT_EQ(tick().kind, Kind::poll);
  // Restarted without persistence: the poll found no entry and queued the request again.
  ASSERT_EQ(reply(queued(3)).kind, Kind::rearm);
  ASSERT_EQ(done().kind, Kind::wait);
  now += 10ms;
  const AcquireAction poll = wake(promoted(kTicket));  // the lost entry's ticket: not a grant
  ASSERT_EQ(poll.kind, Kind::poll);
  EXPECT_EQ(poll.ticket, 3);
  ASSERT_EQ(reply(queued(3)).kind, Kind::rearm);
  ASSERT_EQ(done().kind, Kind::wait);
  EXPECT_EQ(wake(promoted(3)).kind, Kind::grant);
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

}  // namespace
}  // namespace fairsem::detail
