// Compiles fairsem/impl/fork-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/fork-inl.hpp"
