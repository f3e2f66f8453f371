// Compiles fairsem/impl/semaphore/semaphore_admin_listing-inl.hpp into libfairsem (the default
// mode; see fairsem/impl/config.hpp).
#include "fairsem/impl/semaphore/semaphore_admin_listing-inl.hpp"
