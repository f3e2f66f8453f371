#include "checker_tenants.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

#include "checker_record.hpp"

namespace fairsem::stress {

std::vector<std::vector<const Section*>> by_tenant(const std::vector<const Section*>& sections) {
  std::map<int, std::vector<const Section*>> groups;
  for (const Section* s : sections) groups[s->tenant].push_back(s);
  std::vector<std::vector<const Section*>> out;
  out.reserve(groups.size());
  for (auto& [tenant, group] : groups) out.push_back(std::move(group));
  return out;
}

namespace {

/// When `s`'s request was queued at the latest: its call's start plus its process's wait for
/// a CPU.
std::int64_t latest_queue_join(const Section& s) {
  return s.wait_ns + std::max<std::int64_t>(0, s.cpu_wait_ns);
}

void describe_queue_violation(const CheckInput& in, const Section& early, const Section& late,
                              std::vector<std::string>& out) {
  const std::int64_t t0 = record::origin(in);
  const record::KillTimes kills = record::kills_by_pid(in);
  out.push_back(fmt::format(
      "first grant of tenant {} that passed an earlier request of the same tenant (the first "
      "line waited first, the second was granted first):",
      early.tenant));
  for (const Section* s : {&early, &late}) {
    out.push_back("  " + record::describe(*s, record::valid_until(*s, kills), t0));
  }
  record::describe_faults(in, early.wait_ns - in.lease_ns, early.enter_ns, t0, out);
}

}  // namespace

void check_queue_order(const std::vector<const Section*>& blocking, const CheckInput& in,
                       CheckResult& out) {
  if (!in.tenants) return;
  for (std::vector<const Section*>& group : by_tenant(blocking)) {
    std::sort(group.begin(), group.end(),
              [](const Section* a, const Section* b) { return a->token < b->token; });
    out.queue_order_checked += group.size();
    // From the highest token down: the one queued first among those granted later.
    const Section* first_later = nullptr;
    for (auto it = group.rbegin(); it != group.rend(); ++it) {
      const Section& s = **it;
      if (first_later != nullptr &&
          s.wait_ns - latest_queue_join(*first_later) > in.order_slack_ns) {
        if (out.queue_order_violations++ == 0) {
          describe_queue_violation(in, *first_later, s, out.details);
        }
      }
      if (first_later == nullptr || latest_queue_join(s) < latest_queue_join(*first_later))
        first_later = &s;
    }
  }
  if (out.queue_order_violations > 0) {
    out.failures.push_back(
        fmt::format("{} blocking grants passed a request of their tenant that began waiting "
                    "before them (slack {} ms)",
                    out.queue_order_violations, in.order_slack_ns / 1'000'000));
  }
}

std::vector<TenantShare> tenant_shares(const CheckInput& in) {
  std::map<int, TenantShare> shares;
  for (const Section& s : in.sections) {
    if (!s.left) continue;
    const std::int64_t end = s.lost ? std::min(s.leave_ns, s.deadline_ns) : s.leave_ns;
    const std::int64_t back = std::max(s.enter_ns, record::partial_until(s, end));
    const double kept = static_cast<double>(s.units - record::given_back(s));
    const double ns = kept * static_cast<double>(std::max<std::int64_t>(0, end - s.enter_ns)) +
                      static_cast<double>(record::given_back(s)) *
                          static_cast<double>(std::max<std::int64_t>(0, back - s.enter_ns));
    TenantShare& share = shares[s.tenant];
    share.tenant = s.tenant;
    share.unit_seconds += ns / 1e9;
    ++share.grants;
  }
  std::vector<TenantShare> out;
  out.reserve(shares.size());
  for (const auto& [tenant, share] : shares) out.push_back(share);
  return out;
}

}  // namespace fairsem::stress
