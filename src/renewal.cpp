// The compiled library's translation unit for fairsem/impl/renewal/ (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/renewal/units.hpp"
