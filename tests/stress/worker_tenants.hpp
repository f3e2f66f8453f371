#pragma once

// The stress harness's tenants (--tenants): their names, and a worker process's semaphore
// handles, one per tenant (SemaphoreOptions::tenant) beside the one that names none. Each
// thread of this release names one tenant, spread evenly over the threads of every process,
// from when the driver sets SharedLog::tenants_on (at the start, or at the upgrade of a run with
// a previous release's clients); before that its requests name none.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fairsem/fairsem.hpp"
#include "shared_log.hpp"

namespace fairsem::stress {

/// The name of tenant i, 1 .. kMaxTenants ("t1", ...); 0 is none (the default tenant, "").
std::string tenant_name(int i);

/// The tenant the calling thread's requests name now (0: none): next_record writes it into
/// each record the thread takes.
std::uint8_t& current_tenant();

class TenantHandles {
 public:
  /// Opens the handle that names no tenant and, with cfg.tenants, one per tenant.
  TenantHandles(Client& client, const Config& cfg, const SemaphoreOptions& options);

  /// The handle for the next request of the thread of `ts` in the process of `ps` (both in
  /// `log`): its tenant's once tenants_on, else the one that names none. Sets current_tenant().
  FairSemaphore& for_request(const SharedLog& log, const ProcessSlot& ps, const ThreadSlot& ts);

 private:
  std::vector<std::unique_ptr<FairSemaphore>> handles_;  // [0]: none; [i]: tenant_name(i)
};

}  // namespace fairsem::stress
