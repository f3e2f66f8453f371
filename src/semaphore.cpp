// The compiled library's translation unit for fairsem/impl/semaphore/ (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/semaphore/units.hpp"
