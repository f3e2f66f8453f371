// The stress checker finds each broken promise in a synthetic log, and passes a sound one.

#include "checker.hpp"

#include <gtest/gtest.h>

namespace fairsem::stress {
namespace {

constexpr std::int64_t kMs = 1'000'000;

Section section(std::int64_t token, std::int64_t enter_ms, std::int64_t leave_ms, int pid = 1,
                Mode mode = Mode::acquire, std::int64_t slot = 0) {
  Section s;
  s.token = token;
  s.slot = slot;
  s.wait_ns = (enter_ms - 1) * kMs;
  s.enter_ns = enter_ms * kMs;
  s.leave_ns = leave_ms * kMs;
  s.deadline_ns = (leave_ms + 1000) * kMs;
  s.pid = pid;
  s.mode = mode;
  s.left = true;
  return s;
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
  EXPECT_EQ(5u, r.grants);
}

TEST(StressChecker, MoreHoldersThanTheLimitFail) {
  CheckInput in = base(2);
  in.sections = {section(1, 0, 10, 1), section(2, 1, 12, 2), section(3, 5, 20, 3)};
  const CheckResult r = check(in);
  EXPECT_EQ(3, r.max_holders);
  EXPECT_EQ(5 * kMs, r.max_holders_at_ns);
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
  in.sections = {dead, section(2, 1200, 1300, 2)};
  in.kills = {{7, 100 * kMs}};
  EXPECT_TRUE(check(in).ok());
  in.kills = {{7, 1250 * kMs}};  // killed while the next holder was inside
  EXPECT_FALSE(check(in).ok());
  in.kills.clear();  // never ended and never killed: the log is incomplete
  EXPECT_FALSE(check(in).ok());
}

TEST(StressChecker, ATokenGrantedTwiceFails) {
  CheckInput in = base(2);
  in.sections = {section(1, 0, 5, 1), section(1, 10, 15, 2)};
  const CheckResult r = check(in);
  EXPECT_EQ(1u, r.duplicate_tokens);
  EXPECT_FALSE(r.ok());
}

TEST(StressChecker, AWaiterOvertakenBeyondTheSlackIsAFifoViolation) {
  CheckInput in = base(1);
  // Ticket 2 entered 50 ms before ticket 1 did.
  in.sections = {section(1, 60, 70, 1), section(2, 10, 20, 2)};
  const CheckResult r = check(in);
  EXPECT_EQ(1u, r.fifo_violations);
  EXPECT_EQ(1u, r.token_order_violations);
  EXPECT_EQ(50 * kMs, r.worst_inversion_ns);
  EXPECT_FALSE(r.ok());
}

TEST(StressChecker, SlotsSharedOutOfRangeOrWithFallingTokensFail) {
  const auto a = Mode::acquire;
  CheckInput in = base(2);
  // Two valid at once in slot 1.
  in.sections = {section(1, 0, 10, 1, a, 1), section(2, 5, 20, 2, a, 1)};
  CheckResult r = check(in);
  EXPECT_EQ(1u, r.shared_slots);
  EXPECT_FALSE(r.ok());
  // Handed on in turn: fine; a slot at the limit is not.
  in.sections[1] = section(2, 10, 20, 2, a, 1);
  EXPECT_TRUE(check(in).ok());
  in.sections[1].slot = 2;
  r = check(in);
  EXPECT_EQ(1u, r.slots_out_of_range);
  EXPECT_FALSE(r.ok());
  // The next holder of a slot with a lower token (the tokens are granted in order).
  in.sections = {section(5, 0, 10, 1, a, 0), section(6, 0, 10, 2, a, 1),
                 section(7, 20, 30, 1, a, 1), section(4, 40, 50, 2, a, 0)};
  in.order_slack_ns = 100 * kMs;  // only the slot check sees it
  r = check(in);
  EXPECT_EQ(1u, r.slot_tokens_not_increasing);
  EXPECT_EQ(0u, r.shared_slots);
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
  EXPECT_EQ(0u, r.fifo_violations);
  EXPECT_EQ(1u, r.token_order_violations);
}

TEST(StressChecker, GrantsWhoseWaitAFaultDisturbedAreLeftOutOfOrderChecks) {
  CheckInput in = base(1);
  in.sections = {section(1, 60, 70, 1), section(2, 10, 20, 2)};
  in.sections[0].wait_ns = 5 * kMs;              // ticket 1 waited from 5 ms to 60 ms
  in.disturbances = {{40 * kMs, 45 * kMs, {}}};  // during ticket 1's wait
  CheckResult r = check(in);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(1u, r.fifo_checked);
  in.disturbances[0].pids = {2};  // a fault that reached only the other process
  EXPECT_FALSE(check(in).ok());
  in.disturbances[0].pids = {2, 1};
  EXPECT_TRUE(check(in).ok());
  in.disturbances.clear();
  in.stops = {{1, 30 * kMs, 50 * kMs}};  // its own process was frozen while it waited
  r = check(in);
  EXPECT_TRUE(r.ok());
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
  EXPECT_EQ(1u, r.stopped_holders);
  EXPECT_EQ(1u, r.stopped_holders_passed_on);

  in.sections[0].lost = false;
  r = check(in);
  EXPECT_EQ(1u, r.stopped_holders_not_lost);
  EXPECT_FALSE(r.ok());

  in.sections[0].lost = true;
  in.sections[1].token = 4;  // the one who got it meanwhile carries an older token
  r = check(in);
  EXPECT_EQ(1u, r.stopped_holders_token_not_older);
  EXPECT_FALSE(r.ok());

  in.sections[1].wait_ns = 0;  // ...but it asked before the frozen one held: granted earlier,
  r = check(in);               // only noticed late: nothing to say about the freeze
  EXPECT_EQ(0u, r.stopped_holders_passed_on);
  EXPECT_EQ(0u, r.stopped_holders_token_not_older);
}

TEST(StressChecker, AShortFreezeDoesNotCount) {
  CheckInput in = base(1);
  in.sections = {section(5, 0, 300, 1)};
  in.stops = {{1, 10 * kMs, 200 * kMs}};  // shorter than the lease
  const CheckResult r = check(in);
  EXPECT_EQ(0u, r.stopped_holders);
  EXPECT_TRUE(r.ok());
}

}  // namespace
}  // namespace fairsem::stress
