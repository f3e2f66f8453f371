// The stress checker with tenants: FIFO within each tenant, not across them, also against when
// requests began waiting (tokens are given at the grant), and each tenant's share.

#include "checker_tenants.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "checker.hpp"

namespace fairsem::stress {
namespace {

constexpr std::int64_t kTenantMs = 1'000'000;

/// A blocking grant of one unit (slot 0) to `tenant`, asked for at `wait_ms`.
Section grant_to(int tenant, std::int64_t token, std::int64_t wait_ms, std::int64_t enter_ms,
                 std::int64_t leave_ms) {
  Section s;
  s.tenant = tenant;
  s.token = token;
  s.slots = {0};
  s.wait_ns = wait_ms * kTenantMs;
  s.enter_ns = enter_ms * kTenantMs;
  s.leave_ns = leave_ms * kTenantMs;
  s.deadline_ns = (leave_ms + 1000) * kTenantMs;
  s.pid = 1 + tenant;
  s.left = true;
  return s;
}

CheckInput with_tenants() {
  CheckInput in;
  in.limit = 1;
  in.lease_ns = 1000 * kTenantMs;
  in.order_slack_ns = 20 * kTenantMs;
  in.tenants = true;
  return in;
}

// The second request of tenant 1 began waiting 50 ms after the first, and was granted first
// (the lower token), entering before it: the token order holds, the queue order does not.
TEST(StressCheckerTenants, AGrantThatPassedItsTenantsQueueFails) {
  CheckInput in = with_tenants();
  in.sections = {grant_to(1, 20, 0, 100, 110), grant_to(1, 10, 50, 60, 70)};
  const CheckResult r = check(in);
  EXPECT_EQ(r.token_order_violations, 0U);
  EXPECT_EQ(r.queue_order_checked, 2U);
  EXPECT_EQ(r.queue_order_violations, 1U);
  EXPECT_FALSE(r.ok());
}

TEST(StressCheckerTenants, AnotherTenantMayBeGrantedFirst) {
  CheckInput in = with_tenants();
  in.sections = {grant_to(1, 20, 0, 100, 110), grant_to(2, 10, 50, 60, 70)};
  const CheckResult r = check(in);
  EXPECT_EQ(r.queue_order_violations, 0U);
  EXPECT_TRUE(r.ok()) << r.failures.front();
}

// The first request's process waited 40 ms for a CPU: its call may have reached Redis that late.
TEST(StressCheckerTenants, TheQueueOrderCreditsTheEarlierRequestsWaitForACpu) {
  CheckInput in = with_tenants();
  in.sections = {grant_to(1, 20, 0, 100, 110), grant_to(1, 10, 50, 60, 70)};
  in.sections[0].cpu_wait_ns = 40 * kTenantMs;
  EXPECT_TRUE(check(in).ok());
}

// Without tenants a token is the ticket its request queued under: the token order is the
// queue order, and the other check is not made.
TEST(StressCheckerTenants, WithoutTenantsTheQueueOrderIsNotChecked) {
  CheckInput in = with_tenants();
  in.tenants = false;
  in.sections = {grant_to(0, 20, 0, 100, 110), grant_to(0, 10, 50, 60, 70)};
  EXPECT_EQ(check(in).queue_order_checked, 0U);
}

// FIFO by ticket holds within a tenant: tenant 2's lower token may enter after tenant 1's
// higher one only as late as any grant may (the token order across all grants).
TEST(StressCheckerTenants, BlockingFifoIsCountedWithinATenant) {
  CheckInput in = with_tenants();
  in.limit = 2;
  in.sections = {grant_to(1, 11, 0, 10, 20), grant_to(2, 10, 0, 50, 60)};
  in.sections[1].slots = {1};
  const CheckResult r = check(in);
  EXPECT_EQ(r.fifo_violations, 0U);
  EXPECT_EQ(r.token_order_violations, 1U);  // tokens still rise in grant order across tenants
  in.sections[1].tenant = 1;
  EXPECT_EQ(check(in).fifo_violations, 1U);
}

TEST(StressCheckerTenants, ATimedOutWaiterMayBePassedByAnotherTenantOnly) {
  CheckInput in = with_tenants();
  in.timeouts = {Timeout{1, 0, 200 * kTenantMs, 200 * kTenantMs, 9, 1}};
  in.sections = {grant_to(2, 10, 50, 100, 110)};
  EXPECT_EQ(check(in).timeouts_overtaken, 0U);
  in.sections[0].tenant = 1;
  EXPECT_EQ(check(in).timeouts_overtaken, 1U);
}

TEST(StressCheckerTenants, SharesCountUnitsTimesTheTimeHeld) {
  CheckInput in = with_tenants();
  in.sections = {grant_to(1, 10, 0, 0, 10), grant_to(2, 11, 0, 10, 20), grant_to(2, 12, 0, 20, 30)};
  in.sections[0].units = 2;
  in.sections[0].slots = {0, 1};
  in.sections[2].lost = true;
  in.sections[2].deadline_ns = 25 * kTenantMs;  // counts only until its lease ran out
  const std::vector<TenantShare> shares = tenant_shares(in);
  ASSERT_EQ(shares.size(), 2U);
  EXPECT_EQ(shares[0].tenant, 1);
  EXPECT_DOUBLE_EQ(shares[0].unit_seconds, 0.020);
  EXPECT_EQ(shares[1].grants, 2U);
  EXPECT_DOUBLE_EQ(shares[1].unit_seconds, 0.015);
}

}  // namespace
}  // namespace fairsem::stress
