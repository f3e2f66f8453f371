#pragma once

// Decoding the status script's reply (decode_status) and the tenant script's (decode_tenant):
// the entries, and each tenant's totals, which the client adds up from them.

#include "fairsem/impl/config.hpp"
#include "fairsem/impl/protocol/replies.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "fairsem/impl/text.hpp"

namespace fairsem::detail {

namespace status_reply_helpers {

/// The tenants of a status: each one with an entry or a stored weight, by name.
FAIRSEM_INLINE std::vector<TenantStatus> tenants_of(
    const Status& status, const std::map<std::string, long long>& weights) {
  std::map<std::string, TenantStatus> by_name;
  for (const auto& [name, weight] : weights) by_name[name].weight = weight;
  for (const PermitInfo& holder : status.holders) {
    TenantStatus& t = by_name[holder.tenant];
    t.held += holder.count;
    t.holders += 1;
  }
  for (const PermitInfo& waiter : status.waiters) {
    TenantStatus& t = by_name[waiter.tenant];
    t.waiting += waiter.count;
    t.waiters += 1;
    if (waiter.waited && (!t.oldest_wait || *waiter.waited > *t.oldest_wait)) {
      t.oldest_wait = waiter.waited;
    }
  }
  std::vector<TenantStatus> tenants;
  tenants.reserve(by_name.size());
  for (auto& [name, tenant] : by_name) {
    tenant.name = name;
    tenants.push_back(std::move(tenant));
  }
  return tenants;
}

}  // namespace status_reply_helpers

FAIRSEM_INLINE Status decode_status(const Reply& reply) {
  using replies_helpers::expect_at_least;
  constexpr std::size_t kFields = 8;  // per entry
  const auto& items = expect_array(reply, "the status reply", 4);
  const long long now = expect_at_least(items[0], "the server clock", 0);
  Status status;
  status.limit = expect_at_least(items[1], "the limit", 0);
  // -1: the counter holds something that is not a number.
  status.last_ticket = expect_at_least(items[2], "the counter", -1);
  const long long stored_weights = expect_at_least(items[3], "the number of weights", 0);
  if (stored_weights > static_cast<long long>((items.size() - 4) / 2) ||
      (items.size() - 4 - 2 * static_cast<std::size_t>(stored_weights)) % kFields != 0) {
    throw ProtocolError(fmt::format(
        "fairsem: the status reply has {} elements; expected 4, 2 per weight ({}) and {} per "
        "entry",
        items.size(), stored_weights, kFields));
  }
  std::map<std::string, long long> weights;
  std::size_t i = 4;
  for (long long w = 0; w < stored_weights; ++w, i += 2) {
    weights[expect_string(items[i], "a tenant")] = expect_at_least(items[i + 1], "a weight", 1);
  }
  for (; i < items.size(); i += kFields) {
    PermitInfo info;
    info.id = expect_string(items[i], "a permit id");
    info.ticket = expect_integer(items[i + 1], "a ticket");
    // now >= 0, so deadline - now cannot overflow once deadline > now.
    const long long deadline = expect_integer(items[i + 2], "a deadline");
    info.lease_left = milliseconds(deadline > now ? deadline - now : 0);
    info.owner = expect_string(items[i + 3], "owner info");
    info.count = expect_at_least(items[i + 4], "a permit's units", 1);
    if (info.count > kMaxLimit) {
      throw ProtocolError(
          fmt::format("fairsem: the status reply gives {} {} units, more than the "
                      "largest limit",
                      printable(info.id), info.count));
    }
    // When it queued: -1 when unknown. (now - queued cannot overflow once queued >= 0.)
    const long long queued = expect_at_least(items[i + 6], "a queue time", -1);
    info.tenant = expect_string(items[i + 7], "a tenant");
    // (With tenants, a holder may have a later ticket than a waiter: tenants.lua.)
    const std::string& slots = expect_string(items[i + 5], "a holder's slots");
    if (!slots.empty()) {
      info.slots = parse_slots(slots, "a holder's slots");
      if (static_cast<long long>(info.slots.size()) != info.count) {
        throw ProtocolError(fmt::format("fairsem: the status reply gives {} {} units but {} slots",
                                        printable(info.id), info.count, info.slots.size()));
      }
      info.slot = info.slots.front();
      status.holders.push_back(std::move(info));
    } else {
      if (queued >= 0) info.waited = milliseconds(queued < now ? now - queued : 0);
      status.waiters.push_back(std::move(info));
    }
  }
  status.tenants = status_reply_helpers::tenants_of(status, weights);
  return status;
}

FAIRSEM_INLINE long long decode_tenant(const Reply& reply) {
  const auto& items = replies_helpers::expect_elements(reply, "the tenant reply", 1);
  return replies_helpers::expect_at_least(items[0], "the old weight", 1);
}

}  // namespace fairsem::detail
