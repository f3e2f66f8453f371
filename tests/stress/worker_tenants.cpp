#include "worker_tenants.hpp"

#include <fmt/format.h>

#include "stress_worker.hpp"

namespace fairsem::stress {

std::string tenant_name(int i) { return i == 0 ? std::string() : fmt::format("t{}", i); }

std::uint8_t& current_tenant() {
  thread_local std::uint8_t tenant = 0;
  return tenant;
}

Record* next_record(SharedLog& log) {
  const std::uint64_t i = log.next_record.fetch_add(1);
  if (i >= log.capacity) {
    log.full.store(1);
    log.stop.store(1);
    return nullptr;
  }
  log.record(i).tenant = current_tenant();
  return &log.record(i);
}

TenantHandles::TenantHandles(Client& client, const Config& cfg, const SemaphoreOptions& options) {
  for (int i = 0; i <= cfg.tenants; ++i) {
    SemaphoreOptions o = options;
    o.tenant = tenant_name(i);
    handles_.push_back(std::make_unique<FairSemaphore>(client, cfg.name, o));
  }
}

FairSemaphore& TenantHandles::for_request(const SharedLog& log, const ProcessSlot& ps,
                                          const ThreadSlot& ts) {
  const Config& cfg = log.config;
  int tenant = 0;
  if (cfg.tenants > 0 && log.tenants_on.load() != 0) {
    // The threads of this release, numbered across processes, take the tenants in turn.
    const auto slot = static_cast<int>(&ps - log.processes) - cfg.previous_processes;
    const auto thread = static_cast<int>(&ts - ps.threads);
    tenant = 1 + (slot * cfg.threads + thread) % cfg.tenants;
  }
  current_tenant() = static_cast<std::uint8_t>(tenant);
  return *handles_[static_cast<std::size_t>(tenant)];
}

}  // namespace fairsem::stress
