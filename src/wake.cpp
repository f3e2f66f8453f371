// The compiled library's translation unit for fairsem/impl/wake/ (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/wake/units.hpp"
