// Compiles fairsem/impl/runtime/connection_pool-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/runtime/connection_pool-inl.hpp"
