// The compiled library's translation unit for fairsem/impl/threads/ (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/threads/units.hpp"
