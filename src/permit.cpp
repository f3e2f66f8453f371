// Compiles fairsem/impl/semaphore/permit-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/semaphore/permit-inl.hpp"
