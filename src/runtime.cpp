// The compiled library's translation unit for fairsem/impl/runtime/ (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/runtime/units.hpp"
