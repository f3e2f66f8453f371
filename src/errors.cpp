// Compiles fairsem/impl/errors-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/errors-inl.hpp"
