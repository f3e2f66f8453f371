// The compiled library's translation unit for fairsem/impl/protocol/ (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/protocol/units.hpp"
