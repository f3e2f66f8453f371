// Compiles fairsem/impl/permit-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/permit-inl.hpp"
