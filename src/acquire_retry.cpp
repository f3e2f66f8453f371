// Compiles fairsem/impl/acquire_retry-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/acquire_retry-inl.hpp"
