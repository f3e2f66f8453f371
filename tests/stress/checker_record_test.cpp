// What the stress checker tells of a late enter beside the order checks: how much of its lease a
// grant had used up when its client entered (a slow granting call) and how long its thread
// waited for a CPU meanwhile (a loaded machine), among the grants no fault disturbed.

#include <gtest/gtest.h>

#include <string>

#include "checker.hpp"

namespace fairsem::stress {
namespace {

constexpr std::int64_t kMsec = 1'000'000;

/// A blocking grant of one unit (slot `slot`) entered at `enter_ms` whose granting call was
/// sent at `sent_ms`, its thread `cpu_wait_ms` runnable without a CPU meanwhile.
Section entered(std::int64_t token, std::int64_t enter_ms, std::int64_t sent_ms,
                std::int64_t cpu_wait_ms, int pid, std::int64_t slot) {
  Section s;
  s.token = token;
  s.slots = {slot};
  s.wait_ns = (sent_ms - 10) * kMsec;
  s.enter_ns = enter_ms * kMsec;
  s.leave_ns = (enter_ms + 5) * kMsec;
  s.granted_deadline_ns = (sent_ms + 1000) * kMsec;
  s.deadline_ns = s.granted_deadline_ns;
  s.cpu_wait_ns = cpu_wait_ms * kMsec;
  s.pid = pid;
  s.left = true;
  return s;
}

CheckInput lease_of_a_second() {
  CheckInput in;
  in.limit = 2;
  in.lease_ns = 1000 * kMsec;
  in.order_slack_ns = 100 * kMsec;
  return in;
}

TEST(StressLateEnter, TheMostLeaseUsedAtAnUndisturbedEnterIsReportedWithItsCpuWait) {
  CheckInput in = lease_of_a_second();
  in.sections = {entered(1, 20, 10, 0, 1, 0), entered(2, 400, 100, 30, 2, 1),
                 entered(3, 410, 405, 0, 3, 0),
                 // Disturbed: a fault window covers its wait, so it is not judged.
                 entered(4, 1900, 1000, 800, 4, 1)};
  in.disturbances.push_back({1500 * kMsec, 1600 * kMsec, {}});
  const CheckResult r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  EXPECT_EQ(300 * kMsec, r.lease_used_worst_ns);
  EXPECT_EQ(2, r.lease_used_worst_token);
  EXPECT_EQ(30 * kMsec, r.lease_used_worst_cpu_wait_ns);
}

TEST(StressLateEnter, AnOrderViolationShowsTheDeadlineAtTheEnterAndTheCpuWait) {
  CheckInput in = lease_of_a_second();
  // Token 1 was granted by a call sent at 10 ms that took until 950 ms, token 2 entered at
  // 20 ms: 930 ms out of order, with 40 ms of it spent waiting for a CPU.
  in.sections = {entered(1, 950, 10, 40, 1, 0), entered(2, 20, 15, 0, 2, 1)};
  const CheckResult r = check(in);
  ASSERT_EQ(1U, r.token_order_violations);
  EXPECT_EQ(940 * kMsec, r.lease_used_worst_ns);
  std::string lower;
  for (const std::string& d : r.details) {
    if (d.find("token 1 ") != std::string::npos) lower = d;
  }
  // Times since the first request, at 0 ms.
  EXPECT_NE(std::string::npos, lower.find("at the enter 1010.000")) << lower;
  EXPECT_NE(std::string::npos, lower.find("waited 40.0 ms for a CPU")) << lower;
}

TEST(StressLateEnter, AnEnterLateByItsThreadsWaitForACpuIsNoViolation) {
  CheckInput in = lease_of_a_second();
  // As in a cluster run on a loaded machine: tokens 1 and 2 were promoted at once; token 2
  // entered at 20 ms, while token 1's thread, woken at 15 ms, got a CPU only at 637 ms, sent its
  // poll and entered at 640 ms, 620 ms after token 2.
  in.sections = {entered(1, 640, 638, 622, 1, 0), entered(2, 20, 15, 0, 2, 1)};
  CheckResult r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  EXPECT_EQ(0U, r.token_order_violations);
  EXPECT_EQ(0U, r.fifo_violations);
  // The same lateness with the thread asleep (a wake-up that did not come) is a violation.
  in.sections[0].cpu_wait_ns = 0;
  r = check(in);
  EXPECT_EQ(1U, r.token_order_violations);
  EXPECT_EQ(1U, r.fifo_violations);
  // The earlier enter's wait is not taken off: it could only invent an inversion.
  in.sections = {entered(1, 400, 390, 0, 1, 0), entered(2, 405, 395, 380, 2, 1)};
  r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
}

TEST(StressLateEnter, TheWakeUpBoundJudgesTheEnterLessTheThreadsWaitForACpu) {
  CheckInput in = lease_of_a_second();
  in.limit = 1;
  in.wake_bound_ns = 100 * kMsec;
  // Token 1 released its unit at 30 ms (its release returned then); token 2, queued behind it,
  // entered at 330 ms, 300 ms later, 250 ms of them waiting for a CPU.
  in.sections = {entered(1, 20, 15, 0, 1, 0), entered(2, 330, 325, 250, 2, 0)};
  in.sections[0].release_ns = 30 * kMsec;
  in.sections[1].wait_ns = 12 * kMsec;
  CheckResult r = check(in);
  EXPECT_TRUE(r.ok()) << r.failures.front();
  EXPECT_EQ(50 * kMsec, r.wake_worst_out_ns);
  in.sections[1].cpu_wait_ns = 10 * kMsec;
  r = check(in);
  EXPECT_EQ(1U, r.wake_ups_late);
  EXPECT_EQ(290 * kMsec, r.wake_worst_out_ns);
}

}  // namespace
}  // namespace fairsem::stress
