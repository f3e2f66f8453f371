// Compiles fairsem/impl/runtime/admission-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/runtime/admission-inl.hpp"
