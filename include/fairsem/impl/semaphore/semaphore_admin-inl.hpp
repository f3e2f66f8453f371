#pragma once

// SemaphoreAdmin (semaphore.hpp): a handle on a SemaphoreCore (semaphore_core.hpp) for the admin
// calls. Its other facets: listing (semaphore_admin_listing-inl.hpp) and the function libraries
// (semaphore_admin_libraries-inl.hpp).

#include "fairsem/impl/config.hpp"
#include "fairsem/semaphore.hpp"

#include <utility>

#include "fairsem/impl/semaphore/fair_semaphore-inl.hpp"
#include "fairsem/impl/semaphore/semaphore_core.hpp"

namespace fairsem {

FAIRSEM_INLINE SemaphoreAdmin::SemaphoreAdmin(const Client& client, std::string name,
                                              std::string key_prefix)
    : core_(std::make_shared<detail::SemaphoreCore>(client.runtime(), std::move(name),
                                                    detail::admin_options(std::move(key_prefix)),
                                                    /*admin=*/true)) {
  core_->connect();
}

FAIRSEM_INLINE SemaphoreAdmin::SemaphoreAdmin(ConnectionOptions connection, std::string name,
                                              std::string key_prefix)
    : SemaphoreAdmin(Client(std::move(connection)), std::move(name), std::move(key_prefix)) {}

FAIRSEM_INLINE SemaphoreAdmin::SemaphoreAdmin(SemaphoreAdmin&&) noexcept = default;
FAIRSEM_INLINE SemaphoreAdmin& SemaphoreAdmin::operator=(SemaphoreAdmin&& other) noexcept {
  if (this != &other) {
    semaphore_helpers::abandoned_in_child(core_);
    core_ = std::move(other.core_);
  }
  return *this;
}
FAIRSEM_INLINE SemaphoreAdmin::~SemaphoreAdmin() { semaphore_helpers::abandoned_in_child(core_); }

FAIRSEM_INLINE const std::shared_ptr<detail::SemaphoreCore>& SemaphoreAdmin::core() const {
  return semaphore_helpers::live(core_, "SemaphoreAdmin");
}

FAIRSEM_INLINE Status SemaphoreAdmin::status() { return core()->status(); }

FAIRSEM_INLINE EvictResult SemaphoreAdmin::evict(const std::string& permit_id) {
  return core()->evict(permit_id);
}

FAIRSEM_INLINE ResizeResult SemaphoreAdmin::resize(long long new_limit) {
  return core()->resize(new_limit);
}

FAIRSEM_INLINE long long SemaphoreAdmin::set_tenant_weight(const std::string& tenant,
                                                           long long weight) {
  return core()->set_tenant_weight(tenant, weight);
}

FAIRSEM_INLINE const std::string& SemaphoreAdmin::name() const noexcept {
  return semaphore_helpers::name_of(core_);
}

}  // namespace fairsem
