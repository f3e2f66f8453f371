// Compiles fairsem/impl/semaphore/observation-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/semaphore/observation-inl.hpp"
