// Compiles fairsem/impl/connection_pool-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/connection_pool-inl.hpp"
