// Compiles fairsem/impl/net/discovery-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/net/discovery-inl.hpp"
