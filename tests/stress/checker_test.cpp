// The stress checker finds each broken promise in a synthetic log, and passes a sound one.

#include "checker.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace fairsem::stress {
namespace {

constexpr std::int64_t kMs = 1'000'000;

Section section(std::int64_t token, std::int64_t enter_ms, std::int64_t leave_ms, int pid = 1,
                Mode mode = Mode::acquire, std::int64_t slot = 0) {
  Section s;
  s.token = token;
  s.slots = {slot};
  s.wait_ns = (enter_ms - 1) * kMs;
  s.enter_ns = enter_ms * kMs;
  s.leave_ns = leave_ms * kMs;
  s.deadline_ns = (leave_ms + 1000) * kMs;
  s.pid = pid;
  s.mode = mode;
  s.left = true;
  return s;
}

/// A permit of as many units as `slots`.
Section weighted(std::int64_t token, std::vector<std::int64_t> slots, std::int64_t enter_ms,
                 std::int64_t leave_ms, int pid = 1) {
  Section s = section(token, enter_ms, leave_ms, pid);
  s.units = static_cast<long long>(slots.size());
  s.slots = std::move(slots);
  return s;
}

/// A partial release at `at_ms` after which the permit kept `kept`.
void give_back(Section& s, std::int64_t at_ms, std::vector<std::int64_t> kept) {
  s.partial_ns = at_ms * kMs;
  s.kept = std::move(kept);
}

CheckInput base(long long limit) {
  CheckInput in;
  in.limit = limit;
  in.lease_ns = 1000 * kMs;
  in.order_slack_ns = 20 * kMs;
  return in;
}

TEST(StressChecker, SoundLogPasses) {
  CheckInput in = base(2);
  const auto a = Mode::acquire;
  in.sections = {section(1, 0, 10, 1, a, 0), section(2, 1, 12, 2, a, 1),
                 section(3, 10, 20, 3, a, 0), section(4, 12, 30, 1, a, 1),
                 section(5, 20, 25, 2, a, 0)};
  const CheckResult r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  EXPECT_EQ(2, r.max_holders);
  EXPECT_EQ(5U, r.grants);
}

TEST(StressChecker, MoreHoldersThanTheLimitFail) {
  CheckInput in = base(2);
  in.sections = {section(1, 0, 10, 1), section(2, 1, 12, 2), section(3, 5, 20, 3)};
  const CheckResult r = check(in);
  EXPECT_EQ(3, r.max_holders);
  EXPECT_EQ(3, r.max_units);
  EXPECT_EQ(5 * kMs, r.max_units_at_ns);
  EXPECT_EQ(1U, r.over_limit_instants);
  ASSERT_FALSE(r.ok());
}

TEST(StressChecker, ALostPermitCountsOnlyUntilItsDeadline) {
  CheckInput in = base(1);
  Section frozen = section(1, 0, 3000, 1);  // woke long after its lease
  frozen.lost = true;
  frozen.deadline_ns = 1000 * kMs;
  in.sections = {frozen, section(2, 1500, 1600, 2)};
  EXPECT_TRUE(check(in).ok());
  in.sections[0].lost = false;  // had it not seen lost(), two held at once
  EXPECT_FALSE(check(in).ok());
}

TEST(StressChecker, AKilledHolderCountsUntilTheKill) {
  CheckInput in = base(1);
  Section dead = section(1, 0, 0, 7);
  dead.left = false;
  dead.deadline_ns = 2000 * kMs;  // renewed until it died
  in.sections = {dead, section(2, 1200, 1300, 2)};
  in.kills = {{7, 100 * kMs}};
  EXPECT_TRUE(check(in).ok());
  in.kills = {{7, 1250 * kMs}};  // killed while the next holder was inside
  EXPECT_FALSE(check(in).ok());
  in.kills.clear();  // never ended and never killed: the log is incomplete
  EXPECT_FALSE(check(in).ok());
  // Stuck in a call past the deadline it last saw (nothing renews meanwhile), then killed:
  // its lease ran out in Redis first, and the next holder came after that.
  in.sections[0].deadline_ns = 1100 * kMs;
  in.kills = {{7, 1250 * kMs}};
  EXPECT_TRUE(check(in).ok());
}

TEST(StressChecker, ATokenGrantedTwiceFails) {
  CheckInput in = base(2);
  in.sections = {section(1, 0, 5, 1), section(1, 10, 15, 2)};
  const CheckResult r = check(in);
  EXPECT_EQ(1U, r.duplicate_tokens);
  EXPECT_FALSE(r.ok());
}

TEST(StressChecker, AWaiterOvertakenBeyondTheSlackIsAFifoViolation) {
  CheckInput in = base(1);
  // Ticket 2 entered 50 ms before ticket 1 did.
  in.sections = {section(1, 60, 70, 1), section(2, 10, 20, 2)};
  const CheckResult r = check(in);
  EXPECT_EQ(1U, r.fifo_violations);
  EXPECT_EQ(1U, r.token_order_violations);
  EXPECT_EQ(50 * kMs, r.worst_inversion_ns);
  EXPECT_FALSE(r.ok());
}

TEST(StressChecker, SlotsSharedOutOfRangeOrWithFallingTokensFail) {
  const auto a = Mode::acquire;
  CheckInput in = base(2);
  // Two valid at once in slot 1.
  in.sections = {section(1, 0, 10, 1, a, 1), section(2, 5, 20, 2, a, 1)};
  CheckResult r = check(in);
  EXPECT_EQ(1U, r.shared_slots);
  EXPECT_FALSE(r.ok());
  // Handed on in turn: fine; a slot at the limit is not.
  in.sections[1] = section(2, 10, 20, 2, a, 1);
  EXPECT_TRUE(check(in).ok());
  in.sections[1].slots = {2};
  r = check(in);
  EXPECT_EQ(1U, r.slots_out_of_range);
  EXPECT_FALSE(r.ok());
  // The next holder of a slot with a lower token (the tokens are granted in order).
  in.sections = {section(5, 0, 10, 1, a, 0), section(6, 0, 10, 2, a, 1),
                 section(7, 20, 30, 1, a, 1), section(4, 40, 50, 2, a, 0)};
  in.order_slack_ns = 100 * kMs;  // only the slot check sees it
  r = check(in);
  EXPECT_EQ(1U, r.slot_tokens_not_increasing);
  EXPECT_EQ(0U, r.shared_slots);
  EXPECT_FALSE(r.ok());
  // A frozen holder's permit, lost at its deadline, leaves the slot to the next holder.
  in = base(1);
  Section frozen = section(1, 0, 3000, 1);
  frozen.lost = true;
  frozen.deadline_ns = 1000 * kMs;
  in.sections = {frozen, section(2, 1500, 1600, 2)};
  EXPECT_TRUE(check(in).ok());
}

TEST(StressChecker, AnInversionWithinTheSlackIsNotAViolation) {
  CheckInput in = base(2);
  in.sections = {section(1, 15, 30, 1), section(2, 10, 20, 2, Mode::acquire, 1)};
  const CheckResult r = check(in);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(5 * kMs, r.worst_inversion_ns);
}

TEST(StressChecker, TryAcquireGrantsCountForTokenOrderOnly) {
  CheckInput in = base(1);
  in.sections = {section(1, 60, 70, 1, Mode::try_acquire), section(2, 10, 20, 2)};
  const CheckResult r = check(in);
  EXPECT_EQ(0U, r.fifo_violations);
  EXPECT_EQ(1U, r.token_order_violations);
}

TEST(StressChecker, GrantsWhoseWaitAFaultDisturbedAreLeftOutOfOrderChecks) {
  CheckInput in = base(1);
  in.sections = {section(1, 60, 70, 1), section(2, 10, 20, 2)};
  in.sections[0].wait_ns = 5 * kMs;              // ticket 1 waited from 5 ms to 60 ms
  in.disturbances = {{40 * kMs, 45 * kMs, {}}};  // during ticket 1's wait
  CheckResult r = check(in);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(1U, r.fifo_checked);
  in.disturbances[0].pids = {2};  // a fault that reached only the other process
  EXPECT_FALSE(check(in).ok());
  in.disturbances[0].pids = {2, 1};
  EXPECT_TRUE(check(in).ok());
  in.disturbances.clear();
  in.stops = {{1, 30 * kMs, 50 * kMs}};  // its own process was frozen while it waited
  r = check(in);
  EXPECT_TRUE(r.ok());
  in.stops = {{1, 1 * kMs, 4 * kMs}};  // ...or thawed just before it asked
  EXPECT_FALSE(check(in).ok());
  in.thaw_recovery_ns = 10 * kMs;
  EXPECT_TRUE(check(in).ok());
  in.thaw_recovery_ns = 0;
  in.stops.clear();  // undisturbed, the same log is a violation
  EXPECT_FALSE(check(in).ok());
}

TEST(StressChecker, AFrozenHolderMustSeeLostAndBeOvertakenByNewerTokens) {
  CheckInput in = base(1);
  Section frozen = section(5, 0, 1700, 1);
  frozen.lost = true;
  frozen.deadline_ns = 900 * kMs;
  in.sections = {frozen, section(6, 1100, 1200, 2)};
  in.stops = {{1, 10 * kMs, 1600 * kMs}};
  CheckResult r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  EXPECT_EQ(1U, r.stopped_holders);
  EXPECT_EQ(1U, r.stopped_holders_passed_on);

  in.sections[0].lost = false;
  r = check(in);
  EXPECT_EQ(1U, r.stopped_holders_not_lost);
  EXPECT_FALSE(r.ok());

  in.sections[0].lost = true;
  in.sections[1].token = 4;  // the one who got it meanwhile carries an older token
  r = check(in);
  EXPECT_EQ(1U, r.stopped_holders_token_not_older);
  EXPECT_FALSE(r.ok());

  in.sections[1].wait_ns = 0;  // ...but it asked before the frozen one held: granted earlier,
  r = check(in);               // only noticed late: nothing to say about the freeze
  EXPECT_EQ(0U, r.stopped_holders_passed_on);
  EXPECT_EQ(0U, r.stopped_holders_token_not_older);
}

TEST(StressChecker, AShortFreezeDoesNotCount) {
  CheckInput in = base(1);
  in.sections = {section(5, 0, 300, 1)};
  in.stops = {{1, 10 * kMs, 200 * kMs}};  // shorter than the lease
  const CheckResult r = check(in);
  EXPECT_EQ(0U, r.stopped_holders);
  EXPECT_TRUE(r.ok());
}

// --- weighted permits: units, slot sets, partial releases, FIFO for every weight -------------

TEST(StressChecker, SoundWeightedLogPasses) {
  CheckInput in = base(4);
  Section a = weighted(1, {0, 1, 2}, 0, 20);
  give_back(a, 10, {0, 1});  // slot 2 passes on at 10 ms
  in.sections = {a, weighted(2, {3}, 1, 30, 2), weighted(3, {2}, 11, 25, 3),
                 weighted(4, {0, 1, 2}, 25, 40, 1), weighted(5, {3}, 30, 45, 2)};
  const CheckResult r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  EXPECT_EQ(4, r.max_units);
  EXPECT_EQ(3, r.max_holders);
  EXPECT_EQ(0U, r.over_limit_instants);
  EXPECT_EQ(1U, r.partial_releases);
  EXPECT_EQ(9U, r.slot_holdings);
  EXPECT_EQ(5U, r.fifo_checked);
}

TEST(StressChecker, UnitsOverTheLimitFailWhileThePermitsAreFewerThanIt) {
  CheckInput in = base(4);
  // Two permits (limit 4) of 3 and 2 units: 5 units from 5 to 10 ms.
  in.sections = {weighted(1, {0, 1, 2}, 0, 10), weighted(2, {2, 3}, 5, 20, 2)};
  CheckResult r = check(in);
  EXPECT_EQ(2, r.max_holders);
  EXPECT_EQ(5, r.max_units);
  EXPECT_EQ(5 * kMs, r.max_units_at_ns);
  EXPECT_EQ(2, r.max_units_holders);
  EXPECT_EQ(1U, r.over_limit_instants);
  EXPECT_EQ(1U, r.shared_slots);
  EXPECT_FALSE(r.ok());
  // The failure comes with the sections involved: both permits when it went over, both
  // holders of slot 2.
  ASSERT_EQ(6U, r.details.size());
  // (ms since the first request, which began waiting at -1 ms)
  EXPECT_EQ("first time over the limit: 6.000; valid then:", r.details[0]);
  EXPECT_NE(std::string::npos, r.details[1].find("token 1 pid 1 mode 0 units 3 slots [0,1,2]"));
  EXPECT_NE(std::string::npos, r.details[2].find("token 2 pid 2 mode 0 units 2 slots [2,3]"));
  EXPECT_EQ("first slot held by two valid permits:", r.details[3]);
  in.sections[1] = weighted(2, {2, 3}, 10, 20, 2);  // handed on at 10 ms
  r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  EXPECT_EQ(3, r.max_units);
}

TEST(StressChecker, APartialReleaseShrinksTheUnitsHeldAtItsInstant) {
  CheckInput in = base(4);
  Section a = weighted(1, {0, 1, 2}, 0, 100);
  give_back(a, 50, {0, 1});
  in.sections = {a, weighted(2, {2, 3}, 60, 70, 2)};
  CheckResult r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  EXPECT_EQ(4, r.max_units);
  in.sections[1] = weighted(2, {2, 3}, 40, 70, 2);  // took slot 2 before it was given back
  r = check(in);
  EXPECT_EQ(5, r.max_units);
  EXPECT_EQ(1U, r.over_limit_instants);
  EXPECT_EQ(1U, r.shared_slots);
  EXPECT_FALSE(r.ok());
  in.sections[1] = weighted(2, {2, 3}, 60, 70, 2);
  in.sections[0].partial_ns = 0;  // without the partial release, 5 units from 60 ms
  in.sections[0].kept.clear();
  EXPECT_FALSE(check(in).ok());
  // A holder killed after its partial release counts its kept units until the kill.
  in.sections[0] = a;
  in.sections[0].left = false;
  in.kills = {{1, 80 * kMs}};
  in.sections.push_back(weighted(3, {0, 1}, 90, 95, 3));
  r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  in.kills = {{1, 92 * kMs}};
  EXPECT_FALSE(check(in).ok());
}

TEST(StressChecker, APartialReleaseMustGiveBackTheHighestSlots) {
  CheckInput in = base(4);
  Section a = weighted(1, {0, 1, 3}, 0, 100);
  give_back(a, 50, {0, 3});  // gave back slot 1, not 3
  in.sections = {a};
  CheckResult r = check(in);
  EXPECT_EQ(1U, r.partial_wrong_slots);
  EXPECT_FALSE(r.ok());
  in.sections[0].kept = {0, 1, 3};  // gave back nothing
  EXPECT_FALSE(check(in).ok());
  in.sections[0].kept = {0};  // gave back two units: the two highest
  r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  EXPECT_EQ(1U, r.partial_releases);
}

TEST(StressChecker, APermitsSlotsMustBeAsManyDistinctSlotsInRangeAsItsUnits) {
  CheckInput in = base(4);
  in.sections = {weighted(1, {0, 1, 2}, 0, 10)};
  EXPECT_TRUE(check(in).ok());
  in.sections[0].slots = {0, 1};  // 3 units, 2 slots
  CheckResult r = check(in);
  EXPECT_EQ(1U, r.bad_slot_sets);
  EXPECT_FALSE(r.ok());
  in.sections[0].slots = {0, 1, 1};
  EXPECT_EQ(1U, check(in).bad_slot_sets);
  in.sections[0].slots = {2, 1, 0};
  EXPECT_EQ(1U, check(in).bad_slot_sets);
  in.sections[0].slots = {0, 1, 4};
  r = check(in);
  EXPECT_EQ(0U, r.bad_slot_sets);
  EXPECT_EQ(1U, r.slots_out_of_range);
  EXPECT_FALSE(r.ok());
}

TEST(StressChecker, EverySlotsTokenMustGrowAcrossWeightedHolders) {
  CheckInput in = base(4);
  in.order_slack_ns = 100 * kMs;  // only the slot check sees these
  in.sections = {weighted(5, {0, 1}, 0, 10), weighted(6, {2, 3}, 0, 10, 2),
                 weighted(7, {1, 2}, 20, 30), weighted(8, {0}, 40, 50, 2)};
  EXPECT_TRUE(check(in).ok());
  in.sections[3].token = 4;  // slot 0: token 5, then 4
  CheckResult r = check(in);
  EXPECT_EQ(1U, r.slot_tokens_not_increasing);
  EXPECT_EQ(0U, r.shared_slots);
  EXPECT_FALSE(r.ok());
  // The same through a partial release: slot 2 passes from token 5 to token 3.
  Section a = weighted(5, {0, 1, 2}, 0, 20);
  give_back(a, 5, {0, 1});
  in.sections = {a, weighted(3, {2}, 6, 10, 2)};
  r = check(in);
  EXPECT_EQ(1U, r.slot_tokens_not_increasing);
  EXPECT_FALSE(r.ok());
  in.sections[1].token = 6;
  EXPECT_TRUE(check(in).ok());
}

TEST(StressChecker, ALightRequestPassingAnEarlierHeavyOneIsAFifoViolation) {
  CheckInput in = base(4);
  in.order_slack_ns = 100 * kMs;
  // Ticket 1 asks for 3 units and waits; ticket 2 asks for 1 unit later and gets it 290 ms
  // before ticket 1, although both fit within the limit together.
  Section heavy = weighted(1, {0, 1, 2}, 300, 310);
  heavy.wait_ns = 0;
  Section light = weighted(2, {3}, 10, 20, 2);
  light.wait_ns = 5 * kMs;
  in.sections = {heavy, light};
  CheckResult r = check(in);
  EXPECT_EQ(1U, r.fifo_violations);
  EXPECT_EQ(1U, r.fifo_violations_past_heavier);
  EXPECT_EQ(290 * kMs, r.worst_inversion_ns);
  EXPECT_EQ(0U, r.over_limit_instants);  // units were never the problem
  EXPECT_FALSE(r.ok());
  // A heavy one passing a light one is as wrong, though not "past heavier".
  in.sections[0].units = 1;
  in.sections[0].slots = {0};
  in.sections[1].units = 3;
  in.sections[1].slots = {1, 2, 3};
  r = check(in);
  EXPECT_EQ(1U, r.fifo_violations);
  EXPECT_EQ(0U, r.fifo_violations_past_heavier);
  EXPECT_FALSE(r.ok());
  // In order: fine.
  in.sections[1].enter_ns = 320 * kMs;
  in.sections[1].leave_ns = 330 * kMs;
  EXPECT_TRUE(check(in).ok());
}

TEST(StressChecker, ATimedOutWaiterPassedByALaterRequestIsAFifoViolation) {
  CheckInput in = base(4);
  in.order_slack_ns = 100 * kMs;
  // A 3-unit waiter queued at 0 ms that gave up at its deadline, 400 ms, without a permit;
  // meanwhile a 1-unit request made at 200 ms was granted at 210 ms.
  in.timeouts = {{3, 0, 400 * kMs, 401 * kMs, 1}};
  Section light = weighted(9, {0}, 210, 220, 2);
  light.wait_ns = 200 * kMs;
  in.sections = {light};
  CheckResult r = check(in);
  EXPECT_EQ(1U, r.timeouts_checked);
  EXPECT_EQ(1U, r.timeouts_overtaken);
  EXPECT_FALSE(r.ok());
  // The details name the waiter and the request that passed it.
  ASSERT_EQ(3U, r.details.size());
  EXPECT_EQ("first timed-out waiter passed by a later request:", r.details[0]);
  EXPECT_EQ("  timed out: pid 1 units 3 wait 0.000 deadline 400.000 returned 401.000",
            r.details[1]);
  EXPECT_NE(std::string::npos, r.details[2].find("passed by: token 9 pid 2 mode 0 units 1"));
  // Asked within the slack of the waiter's call: it may have queued first.
  in.sections[0].wait_ns = 50 * kMs;
  r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  EXPECT_EQ(1U, r.timeouts_checked);
  // Granted after the waiter's deadline: the waiter had left.
  in.sections[0] = weighted(9, {0}, 450, 460, 2);
  in.sections[0].wait_ns = 200 * kMs;
  EXPECT_TRUE(check(in).ok());
  // A try_acquire that got in while the waiter was queued passed it too.
  in.sections[0] = weighted(9, {0}, 201, 220, 2);
  in.sections[0].mode = Mode::try_acquire;
  in.sections[0].wait_ns = 200 * kMs;
  EXPECT_EQ(1U, check(in).timeouts_overtaken);
  // A fault during the waiter's wait, or a deadline within the slack: not checked.
  in.disturbances = {{300 * kMs, 310 * kMs, {1}}};
  r = check(in);
  EXPECT_EQ(0U, r.timeouts_checked);
  EXPECT_TRUE(r.ok());
  in.disturbances.clear();
  in.timeouts[0].deadline_ns = 80 * kMs;
  in.timeouts[0].end_ns = 81 * kMs;
  r = check(in);
  EXPECT_EQ(0U, r.timeouts_checked);
  EXPECT_TRUE(r.ok());
}

}  // namespace
}  // namespace fairsem::stress
