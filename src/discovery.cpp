// Compiles fairsem/impl/discovery-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/discovery-inl.hpp"
