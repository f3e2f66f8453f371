// The stress checker's wake-up bound (checker_wake.hpp): a grant that comes late after its units
// were freed fails outside faults, and is only measured inside them; units held back by a
// request ahead (a lower token, a heavier head, a waiter that timed out) are not free for it.

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "checker.hpp"
#include "checker_wake.hpp"

namespace fairsem::stress {
namespace {

constexpr std::int64_t kMilli = 1'000'000;

/// A section of `units` units (slots 0 ..), waiting from `wait_ms`, in from `enter_ms`, released
/// at `release_ms` (its release call returned then).
Section held(std::int64_t token, long long units, std::int64_t wait_ms, std::int64_t enter_ms,
             std::int64_t release_ms, int pid) {
  Section s;
  s.token = token;
  s.units = units;
  for (long long slot = 0; slot < units; ++slot) s.slots.push_back(slot);
  s.wait_ns = wait_ms * kMilli;
  s.enter_ns = enter_ms * kMilli;
  s.leave_ns = (release_ms - 1) * kMilli;
  s.release_ns = release_ms * kMilli;
  s.deadline_ns = (release_ms + 1000) * kMilli;
  s.pid = pid;
  s.left = true;
  return s;
}

CheckInput with_bound(long long limit) {
  CheckInput in;
  in.limit = limit;
  in.lease_ns = 1000 * kMilli;
  in.order_slack_ns = 20 * kMilli;
  in.wake_bound_ns = 100 * kMilli;
  return in;
}

TEST(StressWakeUps, AGrantLateAfterAReleaseFails) {
  CheckInput in = with_bound(1);
  // The holder's release returned at 100 ms; the waiter behind it, queued since 50 ms, had its
  // permit only at 450 ms: a wake-up that did not reach it, found by a poll.
  in.sections = {held(1, 1, 0, 1, 100, 1), held(2, 1, 50, 450, 460, 2)};
  CheckResult r = check(in);
  EXPECT_EQ(1U, r.wake_ups_late);
  EXPECT_EQ(350 * kMilli, r.wake_worst_out_ns);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string::npos, r.failures.back().find("1 blocking grants came more than 100 ms"))
      << r.failures.back();
  EXPECT_NE(std::string::npos, r.details.at(1).find("token 2")) << r.details.at(1);
  EXPECT_NE(std::string::npos, r.details.at(1).find("free from 100.000")) << r.details.at(1);
  // In time: fine.
  in.sections[1].enter_ns = 105 * kMilli;
  r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  EXPECT_EQ(5 * kMilli, r.wake_worst_out_ns);
  EXPECT_EQ(2U, r.wake_ups_out);
}

TEST(StressWakeUps, AFaultWindowExcusesALateGrantButMeasuresIt) {
  CheckInput in = with_bound(1);
  in.sections = {held(1, 1, 0, 1, 100, 1), held(2, 1, 50, 450, 460, 2)};
  // A fault that ended at 200 ms: its window runs a lease past that.
  in.fault_windows = {{150 * kMilli, 200 * kMilli, {}}};
  CheckResult r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  EXPECT_EQ(1U, r.wake_ups_in);
  EXPECT_EQ(350 * kMilli, r.wake_worst_in_ns);
  // A worker killed, or stopped, likewise: their windows come from their own records.
  in.fault_windows.clear();
  in.kills = {{3, 400 * kMilli}};
  EXPECT_TRUE(check(in).ok());
  in.kills.clear();
  in.stops = {{3, 90 * kMilli, 95 * kMilli}};
  EXPECT_TRUE(check(in).ok());
  in.stops.clear();
  EXPECT_FALSE(check(in).ok());
}

TEST(StressWakeUps, UnitsHeldBackForARequestAheadAreNotFree) {
  CheckInput in = with_bound(4);
  // 2 units free from 100 ms, but the head (token 2) asks for 3: nobody behind it may pass,
  // and the 1-unit waiter behind it (token 3) comes in with it at 400 ms, when 3 were free.
  in.sections = {held(0, 2, 0, 1, 400, 1), held(1, 2, 0, 1, 100, 4), held(2, 3, 10, 401, 410, 2),
                 held(3, 1, 20, 402, 410, 3)};
  in.sections[1].slots = {2, 3};
  in.sections[3].slots = {3};
  CheckResult r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  EXPECT_LE(r.wake_worst_out_ns, 2 * kMilli);
  // A timed-out waiter that asked first holds the units back as long as it waits.
  in.limit = 1;
  in.sections = {held(1, 1, 0, 1, 100, 1), held(2, 1, 50, 300, 310, 2)};
  in.timeouts = {{1, 20 * kMilli, 290 * kMilli, 295 * kMilli, 3}};
  r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  EXPECT_EQ(5 * kMilli, r.wake_worst_out_ns);
  // So does a cancelled one, until the slack after its end.
  in.timeouts.clear();
  in.withdrawals = {{1, 20 * kMilli, 270 * kMilli, 3, false}};
  r = check(in);
  EXPECT_EQ(10 * kMilli, r.wake_worst_out_ns);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  // One that asked after it (beyond the slack) does not.
  in.withdrawals[0].wait_ns = 80 * kMilli;
  EXPECT_FALSE(check(in).ok());
}

TEST(StressWakeUps, APartialReleaseAndAnExpiryFreeUnits) {
  CheckInput in = with_bound(3);
  // Token 1 holds 3 units and gives 2 back at 50 ms (its call returned at 52 ms); token 2 asks
  // for 2 and has them only at 400 ms.
  Section big = held(1, 3, 0, 1, 600, 1);
  big.partial_ns = 50 * kMilli;
  big.partial_done_ns = 52 * kMilli;
  big.kept = {0};
  in.sections = {big, held(2, 2, 10, 400, 410, 2)};
  in.sections[1].slots = {1, 2};
  CheckResult r = check(in);
  EXPECT_EQ(348 * kMilli, r.wake_worst_out_ns);
  EXPECT_FALSE(r.ok());
  // A permit whose release failed frees its units when its lease runs out.
  in.sections = {held(1, 3, 0, 1, 100, 1), held(2, 2, 10, 400, 410, 2)};
  in.sections[0].release_ns = 0;
  in.sections[0].deadline_ns = 390 * kMilli;
  r = check(in);
  EXPECT_EQ(10 * kMilli, r.wake_worst_out_ns);
  EXPECT_TRUE(r.ok()) << r.failures.front();
}

TEST(StressWakeUps, TriesAndClientsOfThePreviousReleaseAreNotJudged) {
  CheckInput in = with_bound(1);
  in.sections = {held(1, 1, 0, 1, 100, 1), held(2, 1, 50, 450, 460, 2)};
  in.sections[1].mode = Mode::try_acquire;
  EXPECT_TRUE(check(in).ok());
  in.sections[1].mode = Mode::acquire;
  in.sections[1].previous = true;
  EXPECT_TRUE(check(in).ok());
  EXPECT_EQ(1U, wake_delays(in).size());
}

}  // namespace
}  // namespace fairsem::stress
