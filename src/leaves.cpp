// Compiles fairsem/impl/leaves-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/leaves-inl.hpp"
