// Compiles fairsem/impl/net/connection-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/net/connection-inl.hpp"
