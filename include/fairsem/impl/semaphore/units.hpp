#pragma once

// The implementation files of fairsem/impl/semaphore/ (one semaphore: SemaphoreCore, the acquire
// drivers, permits, FairSemaphore and SemaphoreAdmin), listed once: src/semaphore.cpp compiles them
// into libfairsem, and fairsem/impl/header_only.hpp includes them in header-only mode. A new
// implementation file of this folder is added here and nowhere else.

#include "fairsem/impl/semaphore/acquire_io-inl.hpp"
#include "fairsem/impl/semaphore/async_acquire-inl.hpp"
#include "fairsem/impl/semaphore/fair_semaphore-inl.hpp"
#include "fairsem/impl/semaphore/in_flight-inl.hpp"
#include "fairsem/impl/semaphore/observation-inl.hpp"
#include "fairsem/impl/semaphore/permit-inl.hpp"
#include "fairsem/impl/semaphore/semaphore_admin-inl.hpp"
#include "fairsem/impl/semaphore/semaphore_admin_libraries-inl.hpp"
#include "fairsem/impl/semaphore/semaphore_admin_listing-inl.hpp"
#include "fairsem/impl/semaphore/semaphore_core-inl.hpp"
#include "fairsem/impl/semaphore/semaphore_core_acquire-inl.hpp"
#include "fairsem/impl/semaphore/semaphore_core_leaves-inl.hpp"
#include "fairsem/impl/semaphore/semaphore_core_renewal-inl.hpp"
#include "fairsem/impl/semaphore/semaphore_options-inl.hpp"
