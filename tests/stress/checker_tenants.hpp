#pragma once

// The checker's view of tenants (--tenants): FIFO holds within each tenant, not across them
// (weighted fair queuing picks the tenant), and each tenant's share of the units held.
//
// With tenants a waiter's token is given when it is granted (a new ticket), not when it queues,
// so the token order of a tenant's grants says only that its clients saw them in grant order.
// check_queue_order also holds them to the order their requests began waiting: among one
// tenant's blocking grants none may carry a lower token (be granted earlier) than one of the
// same tenant whose call began more than the order slack before its own, that one's start
// judged plus its process's wait for a CPU (Section::cpu_wait_ns: its call may have reached
// Redis that much later). The grants a fault disturbed are left out, as for the other order
// checks.

#include <cstdint>
#include <vector>

#include "checker.hpp"

namespace fairsem::stress {

/// `sections` grouped by tenant (in tenant order; one group when none names a tenant).
std::vector<std::vector<const Section*>> by_tenant(const std::vector<const Section*>& sections);

/// With in.tenants: fills queue_order_violations and queue_order_checked of `out` from the
/// undisturbed blocking grants `blocking`, and fails on a violation (with its details).
void check_queue_order(const std::vector<const Section*>& blocking, const CheckInput& in,
                       CheckResult& out);

/// One tenant's part of the held unit-time: units x time from enter to leave (the units given
/// back, only until the partial release; a lost permit, only until its deadline), of the
/// sections that left.
struct TenantShare {
  int tenant = 0;
  double unit_seconds = 0;
  std::size_t grants = 0;
};
std::vector<TenantShare> tenant_shares(const CheckInput& in);

}  // namespace fairsem::stress
