// Compiles fairsem/impl/semaphore/fair_semaphore-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/semaphore/fair_semaphore-inl.hpp"
