// The compiled library's translation unit for fairsem/impl/net/ (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/net/units.hpp"
