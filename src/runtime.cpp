// Compiles fairsem/impl/runtime/runtime-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/runtime/runtime-inl.hpp"
