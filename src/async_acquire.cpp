// Compiles fairsem/impl/semaphore/async_acquire-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/semaphore/async_acquire-inl.hpp"
