// The stress harness's driver on tenants (--tenants) and upgrades: the tenants' weights, the
// upgrade of the semaphore to data model 3 under clients of 0.4 (--upgrade-at-s), the checks
// that their refusals came after it and only after it, the tenants' shares in the summary, and
// the end of a rolling upgrade (finish_upgrade).

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checker_tenants.hpp"
#include "driver.hpp"
#include "shared_log.hpp"
#include "worker_tenants.hpp"

namespace fairsem::stress {

bool Driver::store_weights() {
  // The first store of a run upgrades the semaphore to data model 3 (tenant.lua).
  const std::int64_t deadline = now_ns() + ms_to_ns(10'000);
  for (int i = 1; i <= s_.tenants; ++i) {
    for (;;) {
      try {
        if (!admin_) admin_.emplace(admin_connection(), name_, prefix_);
        (void)admin_->set_tenant_weight(tenant_name(i), s_.tenant_weights[i - 1]);
        break;
      } catch (const Error& e) {
        if (now_ns() >= deadline) {
          failures_.push_back(
              fmt::format("the weight of {} was never stored: {}", tenant_name(i), e.what()));
          return false;
        }
        std::this_thread::sleep_for(milliseconds(50));  // a fault on the server
      }
    }
  }
  return true;
}

void Driver::start_tenants() {
  if (s_.tenants == 0 || s_.upgrade_at_s > 0) return;
  // No load yet, so no fault either: the weights are in place before the first request.
  if (store_weights()) shm_->log().tenants_on.store(1);
}

void Driver::begin_upgrade() {
  upgrade_ns_ = now_ns();
  if (s_.upgrade_by == "weight") (void)store_weights();
  shm_->log().tenants_on.store(1);
}

void Driver::watch_upgrade() {
  try {
    if (!raw_) raw_.emplace(raw_connection());
    const auto model = raw_->command({"HGET", prefix_ + ":{" + name_ + "}:meta", "model"});
    if (model.str != "3") return;
  } catch (const Error&) {
    return;  // a fault on the server: the next tick asks again
  }
  model3_ns_ = now_ns();
  if (s_.upgrade_by == "tenant") (void)store_weights();
  // Waiters of 0.4 queued before the upgrade may still be promoted under a new ticket that
  // their client cannot take (it is refused from then on); their units stay held, unseen by the
  // log, until their lease runs out: a fault for the wake-up bound and the order checks.
  const std::int64_t until = model3_ns_ + ms_to_ns(2 * s_.lease_ms);
  fault(upgrade_ns_, until);
  disturb(upgrade_ns_, until);
}

void Driver::check_tenants(const CheckInput& checked) {
  std::uint64_t refusals = 0;
  std::int64_t first_refusal = 0;
  for (const ProcessSlot& ps : shm_->log().processes) {
    refusals += ps.model_refusals.load();
    const std::int64_t first = ps.first_refusal_ns.load();
    if (first != 0 && (first_refusal == 0 || first < first_refusal)) first_refusal = first;
  }
  if (refusals > 0 && (upgrade_ns_ == 0 || first_refusal < upgrade_ns_)) {
    failures_.push_back(fmt::format(
        "{} calls of clients of {} refused as of a later data model, the first before the "
        "upgrade began",
        refusals, s_.previous_release));
  }
  if (s_.upgrade_at_s <= 0) return;
  if (upgrade_ns_ == 0) {
    failures_.push_back("the load ended before the upgrade to data model 3");
    return;
  }
  if (model3_ns_ == 0) {
    failures_.push_back("the semaphore never reached data model 3 after the upgrade began");
    return;
  }
  if (refusals == 0) {
    failures_.push_back(fmt::format("no call of a client of {} was refused after the upgrade",
                                    s_.previous_release));
  }
  std::size_t old_after = 0, new_after = 0;
  for (const Section& s : checked.sections) {
    if (s.wait_ns <= model3_ns_) continue;
    ++(s.previous ? old_after : new_after);
  }
  if (old_after > 0) {
    failures_.push_back(
        fmt::format("{} grants to clients of {} that asked once the semaphore was in data model 3",
                    old_after, s_.previous_release));
  }
  if (new_after == 0) failures_.push_back("no grant after the upgrade to data model 3");
}

void Driver::print_tenants(const CheckInput& checked, const CheckResult& r) const {
  if (s_.tenants == 0) return;
  const auto ms = [](std::int64_t ns) { return static_cast<double>(ns) / 1e6; };
  const std::vector<TenantShare> shares = tenant_shares(checked);
  double named = 0;
  for (const TenantShare& t : shares) named += t.tenant != 0 ? t.unit_seconds : 0;
  const int weights = std::accumulate(s_.tenant_weights.begin(), s_.tenant_weights.end(), 0);
  std::vector<std::string> parts;
  for (const TenantShare& t : shares) {
    if (t.tenant == 0) {
      parts.push_back(fmt::format("no tenant {:.1f} unit-s ({} grants)", t.unit_seconds, t.grants));
      continue;
    }
    parts.push_back(
        fmt::format("{} {:.1f} % (weight {}: {:.1f} %; {} grants)", tenant_name(t.tenant),
                    named > 0 ? 100 * t.unit_seconds / named : 0.0, s_.tenant_weights[t.tenant - 1],
                    100.0 * s_.tenant_weights[t.tenant - 1] / weights, t.grants));
  }
  fmt::print("{:<44} {}\n", "tenants' shares of held unit-time", fmt::join(parts, ", "));
  fmt::print("{:<44} {} of {} checked\n", "blocking grants that passed their tenant's queue",
             r.queue_order_violations, r.queue_order_checked);
  if (s_.upgrade_at_s > 0) {
    std::uint64_t refusals = 0;
    for (const ProcessSlot& ps : shm_->log().processes) refusals += ps.model_refusals.load();
    fmt::print(
        "{:<44} began {:.0f} ms into the run, model 3 seen {:.0f} ms later; {} calls of "
        "{} clients refused\n",
        "upgrade to data model 3", ms(upgrade_ns_ - load_start_ns_), ms(model3_ns_ - upgrade_ns_),
        refusals, s_.previous_release);
  }
}

void Driver::finish_upgrade() {
  // The rolling upgrade ends: this version's client is the last to use the semaphore, and its
  // last holder out takes what the previous release's clients left behind (keys-and-scripts.md).
  const std::int64_t deadline = now_ns() + ms_to_ns(5000);
  do {
    try {
      SemaphoreOptions o;
      o.limit = s_.limit;
      o.key_prefix = prefix_;
      o.lease = milliseconds(s_.lease_ms);
      FairSemaphore sem(admin_connection(), name_, o);
      if (std::optional<Permit> p = sem.try_acquire()) {
        p->release();
        return;
      }
      failures_.push_back("after the run, a permit of an idle semaphore was refused");
      return;
    } catch (const Error& e) {
      fmt::print(stderr, "fairsem_stress: the upgrade's last acquire failed: {}\n", e.what());
    }
    std::this_thread::sleep_for(milliseconds(100));
  } while (now_ns() < deadline);
  failures_.push_back("after the run, no permit could be acquired");
}

}  // namespace fairsem::stress
