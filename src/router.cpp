// Compiles fairsem/impl/net/router-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/net/router-inl.hpp"
