// Compiles fairsem/impl/observation-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/observation-inl.hpp"
