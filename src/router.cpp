// Compiles fairsem/impl/router-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/router-inl.hpp"
