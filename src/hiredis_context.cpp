// Compiles fairsem/impl/hiredis_context-inl.hpp into libfairsem (the default mode; see
// fairsem/impl/config.hpp).
#include "fairsem/impl/hiredis_context-inl.hpp"
